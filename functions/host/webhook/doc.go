// Package webhook owns the reference host's built-in workflows and the
// webhook effect: the workflow ids and the validated createRun request
// (ParseCreate), the webhook destination policy (WebhookPolicy, checked at
// createRun and again at connect time), the effect's identity
// (WebhookIdentity) and its exactly-once delivery through the ledger
// (Webhook.Deliver).
package webhook
