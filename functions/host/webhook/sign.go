package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
)

// SigningSecrets gives the secrets a tenant's deliveries are signed with
// (RED_TEAM 340). A delivery of a tenant with a secret carries the
// Standard Webhooks headers webhook-id, webhook-timestamp and
// webhook-signature; a tenant without one is sent unsigned.
type SigningSecrets interface {
	// WebhookSecrets returns the raw key bytes of tenant's signing
	// secrets, the current one first (during rotations' graces, each
	// replaced one still in its grace after it, newest first); none when the tenant has no secret. An error sends
	// nothing: Deliver returns it before the effect is claimed.
	WebhookSecrets(ctx context.Context, tenant string) ([][]byte, error)
}

// The Standard Webhooks headers of a signed delivery.
const (
	headerWebhookID        = "webhook-id"
	headerWebhookTimestamp = "webhook-timestamp"
	headerWebhookSignature = "webhook-signature"
)

// webhookIDDomain separates webhookID's hash from every other hash of a
// provider key.
const webhookIDDomain = "idemkit:webhook-id:v1\x00"

// webhookID is a delivery's webhook-id: "msg_" and 32 hex digits of a
// SHA-256 of the effect's provider key, so the same on every try of one
// effect, and naming neither the key nor a caller's value.
func webhookID(providerKey string) string {
	s := sha256.Sum256([]byte(webhookIDDomain + providerKey))
	return "msg_" + hex.EncodeToString(s[:16])
}

// sign sets the Standard Webhooks headers of one try on h: webhook-id,
// webhook-timestamp (unix seconds, ts) and webhook-signature, one "v1,"
// signature per secret (space-separated), each the base64 of an
// HMAC-SHA256 keyed by the secret over "{id}.{timestamp}.{body}". With no
// secret it sets nothing.
func sign(h http.Header, secrets [][]byte, providerKey string, ts int64, body []byte) {
	if len(secrets) == 0 {
		return
	}
	id, t := webhookID(providerKey), strconv.FormatInt(ts, 10)
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		m := hmac.New(sha256.New, s)
		m.Write([]byte(id))
		m.Write([]byte{'.'})
		m.Write([]byte(t))
		m.Write([]byte{'.'})
		m.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	h.Set(headerWebhookID, id)
	h.Set(headerWebhookTimestamp, t)
	h.Set(headerWebhookSignature, strings.Join(sigs, " "))
}
