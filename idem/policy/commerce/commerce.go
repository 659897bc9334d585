// Package commerce is the commerce platform's idempotency policy, a preset
// of package idem: Policy (its key grammar Key, scope, cache rule, replay
// and wait-mode headers and error body) and the names it defines.
// Importing the package registers the policy under the name "commerce"
// (idem.PolicyNamed, IDEMPOTENCY_POLICY=commerce).
package commerce

import (
	"time"
	"unicode"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/apierr"
)

func init() { idem.RegisterPolicy(Policy) }

// The commerce platform's policy: its key grammar, scope, cache rule,
// replay and wait-mode headers and error body.
var (
	// Policy is the commerce platform's policy: a key is any
	// string of 1..255 characters (Key); it belongs to one
	// namespace and one calling worker, both read from the credential
	// (Scope.Credential CredentialNamespace, CredentialWorker: authorizer
	// context keys or JWT claims, never the request), beside the tenant;
	// the operation is not in the scope but in the fingerprint, so the same
	// key on a different operation or input is 409 with the policy's own
	// code CodeIdempotencyMismatch and nothing runs; a request rejected at
	// the door (400, 401, 403, 429), or a create refused because another
	// run holds its scope (409 run_already_active), records nothing, a
	// store out of reach while it ran (503 idemkit.store_unavailable)
	// leaves the key retryable, and every other
	// outcome, a 5xx included, is final and replayed as it was
	// (its Cache: a failed action replays as failed, the key never
	// runs again); records held forever (no expiry attribute, so neither
	// TTL nor the sweeper ever deletes one); replays carry
	// "Idempotent-Replayed: true"; a duplicate of a pending request waits
	// as its Idempotency-Mode header says (HeaderMode: sync waits up to its
	// budget, async gets the pending action at once); in-flight
	// Retry-After as idem.PolicyOpenWOP; the OpenWOP envelope, with the
	// policy's code for a mismatch (commerceErrorBody). A key binds one
	// Action, not one HTTP response (Replay idem.ReplayObject): on a route that
	// loads the object its first execution created (idem.Request.Object), a
	// replay answers that Action as it is now — settled, in its final
	// status; still pending, waited on as Idempotency-Mode says and then
	// answered 202 with Retry-After — and elsewhere the stored response.
	Policy = idem.Policy{
		Name:      "commerce",
		Key:       Key,
		Scope:     idem.ScopeParts{Credential: []string{CredentialNamespace, CredentialWorker}},
		Cache:     cacheCommerce,
		Retention: idem.Forever,
		Headers:   replayHeader,
		InFlight:  idem.InFlightAnswer{RetryAfter: time.Second, ModeHeader: HeaderMode},
		ErrorBody: commerceErrorBody,
		Replay:    idem.ReplayObject,
	}

	// Key is the commerce platform's policy: any string of 1..255
	// characters, counted as Unicode code points of valid UTF-8 (so "é" is
	// one character and a non-ASCII key is accepted as sent). A comma is an
	// ordinary character of the key and never splits it; inner spaces are
	// part of it too. Refused (400 idempotency_key_invalid): a value that is
	// not valid UTF-8 and any control character, C0 (tab included), DEL or
	// C1 (details.reason "charset": HTTP cannot carry them in a header
	// field, Go's HTTP server refuses the request); leading or trailing
	// whitespace (reason "whitespace", where the adapter sees the raw
	// header: HTTP strips it in transit, so " k" and "k" would otherwise be
	// one key on one path and two on another).
	//
	// Repeated headers, per adapter: the net/http middleware and the REST
	// adapter see every header (multiValueHeaders) and refuse two
	// Idempotency-Key headers (reason "multiple"); an HTTP API (payload 2.0)
	// event carries one value per name, API Gateway joining repeated
	// headers with a comma, so two headers there arrive as one
	// comma-joined value, which this grammar reads as one key containing a
	// comma: a client sends the header once. The SQS and event adapters
	// take the key from event.Config.Key, never from a header.
	Key = idem.KeyPolicy{Name: "commerce", MinLen: 1, MaxLen: 255, Runes: true, Allow: commerceKeyChar}
)

// commerceKeyChar is Key's Allow: every code point but the
// control characters (C0, DEL, C1).
func commerceKeyChar(r rune) bool { return !unicode.IsControl(r) }

// The commerce policy's names: the credential values that scope a key
// (Policy.Scope.Credential: authorizer context keys or JWT claims
// set from the caller's credential, never from the request), its replay
// header, its wait-mode request header (idem.InFlightAnswer.ModeHeader) and its
// code for a key reused on a different operation or input (HTTP 409; the
// OpenWOP default's idempotency_key_mismatch).
const (
	CredentialNamespace     = "namespace"
	CredentialWorker        = "worker"
	HeaderIdempotentReplay  = "Idempotent-Replayed"
	HeaderMode              = "Idempotency-Mode"
	CodeIdempotencyMismatch = "idempotency-mismatch"
)

// cacheCommerce is the commerce policy's idem.Policy.Cache: a request rejected
// at the door, 400, 401, 403 or 429, or a create refused because another
// run holds its scope (409 run_already_active), records nothing
// (idem.Forget), so the same key later runs fresh; a 503
// idemkit.store_unavailable (a store out of reach while the action ran:
// its outcome unknown, not failed) leaves the record retryable
// (idem.Retry), so the same key runs again, as its Retry-After says, and
// so do a 499 (the request cut short by its client's hang-up, its
// outcome unknown) and a 409 idempotency_in_flight (a service the handler
// forwarded the key to still processing it);
// every other outcome, 1xx..3xx, the other 4xx and every other 5xx, is
// final and replayed (a failed action replays as failed). A handler error
// or panic (no response) still leaves the record retryable, as under
// every policy.
func cacheCommerce(status int, code string) idem.Disposition {
	switch status {
	case 400, 401, 403, 429:
		return idem.Forget
	}
	if status == 409 && code == apierr.CodeRunAlreadyActive {
		return idem.Forget
	}
	if status == 409 && code == apierr.CodeIdempotencyInFlight {
		// "Not yet": a handler passing on the answer of a service it
		// forwarded the key to, still processing it (RED_TEAM 431).
		return idem.Retry
	}
	if status == idem.StatusClientClosed {
		// A request cut short by its client's hang-up (a handler's own
		// 499, as grpc-gateway answers a cancelled call): no failed
		// action, its outcome unknown; the same key runs again
		// (RED_TEAM 430).
		return idem.Retry
	}
	if status == 503 && code == idem.CodeStoreUnavailable {
		// A store out of reach while the action ran: its outcome is
		// unknown, not failed. The answer says to retry with the same
		// key, so the record stays retryable (the same key runs again),
		// as for the Guard's own store outage.
		return idem.Retry
	}
	return idem.Replay
}

// commerceErrorBody is the OpenWOP envelope with the commerce policy's code
// for a mismatch (CodeIdempotencyMismatch; the registry code it stands for
// in details.openwopCode); every other answer keeps its registry code.
func commerceErrorBody(e idem.ErrorInfo) []byte {
	if e.Code == apierr.CodeIdempotencyKeyMismatch {
		d := make(map[string]any, len(e.Details)+1)
		for k, v := range e.Details {
			d[k] = v
		}
		d["openwopCode"] = e.Code
		e.Code, e.Details = CodeIdempotencyMismatch, d
	}
	return (&apierr.Error{Code: e.Code, Message: e.Message, Details: e.Details}).Body()
}

// replayHeader is Policy's Headers: a replay carries
// "Idempotent-Replayed: true" (HeaderIdempotentReplay), and no other
// answer gains a header.
func replayHeader(h map[string][]string, a idem.Answer) {
	if a.Replay {
		h[HeaderIdempotentReplay] = []string{"true"}
	}
}
