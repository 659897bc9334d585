// Package webhook owns the reference host's built-in workflows and the
// webhook effect: the workflow ids and the validated createRun request
// (ParseCreate), the webhook destination policy (WebhookPolicy, checked at
// createRun and again at connect time), the effect's identity
// (WebhookIdentity), its exactly-once delivery through the ledger
// (Webhook.Deliver) and, for a tenant with a signing secret, its Standard
// Webhooks signature (Webhook.Secrets).
package webhook
