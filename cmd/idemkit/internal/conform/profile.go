package conform

import (
	"crypto/rand"
	"strings"

	"github.com/idemkit/idemkit/client"
)

// rules are the observable Layer-1 rules of one profile.
type rules struct {
	replayHeader string // the replay marker
	markFresh    bool   // a fresh answer carries the marker with value "false"

	// Accepted error codes, by meaning. An empty set accepts any code (the
	// status alone is checked).
	invalidCodes, validationCodes, mismatchCodes, inFlightCodes []string

	validationStatuses []int

	// noRetryDetails: the in-flight 409 carries no retry timing in details
	// (OpenWOP).
	noRetryDetails bool

	// mismatchMessage, when set, is the mismatch envelope's message, exactly.
	mismatchMessage string
	// inFlightRetryAfter, when set, is the in-flight 409's Retry-After,
	// exactly.
	inFlightRetryAfter string
	// inFlightNoWait: a duplicate of a request in progress is answered 409 at
	// once, never held for the first one's answer (ERP policy).
	inFlightNoWait bool
	// inFlightPending: a duplicate of a request in progress that is not held
	// until its answer gets the pending action — 202 with Retry-After —
	// never 409 in flight (the commerce policy: a pending Action is answered
	// as its mode says, sync once its wait budget ends).
	inFlightPending bool
	// replayObject: a replay is the object the key created as it is now
	// (same resource, same status, its current body), not the first body
	// byte for byte (the commerce policy: a key binds one Action).
	replayObject bool
}

// The ERP policy's codes and messages.
const (
	erpInProgress       = "IDEMPOTENCY_REQUEST_IN_PROGRESS"
	erpConflict         = "IDEMPOTENCY_KEY_CONFLICT"
	erpConflictMessage  = "The Idempotency-Key has already been used with a different request payload."
	commerceMismatch    = "idempotency-mismatch"
	commerceReplay      = "Idempotent-Replayed"
	commerceMaxKeyChars = 255
)

func rulesFor(p Profile) rules {
	switch p {
	case ProfileERP:
		return rules{
			replayHeader:       "Idempotency-Replayed",
			markFresh:          true,
			invalidCodes:       nil, // the ERP policy names no code for a malformed key
			validationCodes:    nil,
			validationStatuses: []int{400, 422},
			mismatchCodes:      []string{erpConflict},
			inFlightCodes:      []string{erpInProgress},
			mismatchMessage:    erpConflictMessage,
			inFlightRetryAfter: "2",
			inFlightNoWait:     true,
		}
	case ProfileCommerce:
		return rules{
			replayHeader:       commerceReplay,
			invalidCodes:       nil, // the commerce policy names no code for a malformed key
			validationCodes:    nil,
			validationStatuses: []int{400},
			mismatchCodes:      []string{commerceMismatch},
			inFlightCodes:      nil,
			inFlightPending:    true,
			replayObject:       true,
		}
	}
	return rules{
		replayHeader:       "OpenWOP-Idempotent-Replay",
		invalidCodes:       []string{"idempotency_key_invalid"},
		validationCodes:    []string{"validation_error"},
		validationStatuses: []int{400},
		mismatchCodes:      []string{"idempotency_key_mismatch"},
		inFlightCodes:      []string{"idempotency_in_flight"},
		noRetryDetails:     true,
	}
}

// keyCase is one key of the key-grammar scenario. Several values mean several
// Idempotency-Key header lines.
type keyCase struct {
	label  string
	values []string
}

const b64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// randomKey returns n random characters: base64url, with the given extra
// characters spliced in so that each appears at least once.
func randomKey(n int, extra string) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = b64url[int(b[i])%len(b64url)]
	}
	for i := 0; i < len(extra) && i < n; i++ {
		b[(i*7+3)%n] = extra[i]
	}
	return string(b)
}

// keyCases returns the keys a conforming API must accept and those it must
// reject with 400.
func keyCases(p Profile) (accept, reject []keyCase) {
	one := func(label, v string) keyCase { return keyCase{label, []string{v}} }
	if p == ProfileCommerce {
		accept = []keyCase{
			one("UUIDv4", client.NewKey()),
			one("1 character", randomKey(1, "")),
			one("255 characters", randomKey(commerceMaxKeyChars, "")),
			one("255 non-ASCII characters", strings.Repeat("é", commerceMaxKeyChars-22)+randomKey(22, "")),
			one("non-ASCII", "commande-"+randomKey(16, "")+"-日本"),
			one("with spaces, slash, colon and plus", "cart "+randomKey(16, "/:+")+" checkout"),
		}
		reject = []keyCase{
			one("256 characters", randomKey(commerceMaxKeyChars+1, "")),
			one("256 non-ASCII characters", strings.Repeat("é", commerceMaxKeyChars+1-22)+randomKey(22, "")),
		}
		return accept, reject
	}
	if p == ProfileERP {
		accept = []keyCase{
			one("UUIDv4", client.NewKey()),
			one("8 characters", randomKey(8, "")),
			one("128 characters with . _ : -", randomKey(128, ".:_-")),
			one("ERP style", "ERP-WO-"+strings.ToUpper(randomKey(12, ""))+":000001"),
		}
		reject = []keyCase{
			one("7 characters", randomKey(7, "")),
			one("129 characters", randomKey(129, "")),
			one("tilde", randomKey(30, "~")),
			one("slash", randomKey(30, "/")),
			one("inner space", randomKey(15, "")+" "+randomKey(15, "")),
			one("non-ASCII", randomKey(30, "")+"é"),
		}
		return accept, reject
	}
	accept = []keyCase{
		one("UUIDv4", client.NewKey()),
		one("22-character base64url", client.NewCompactKey()),
		one("128 characters with . _ ~ -", randomKey(128, "._~-")),
	}
	reject = []keyCase{
		one("21 characters", randomKey(21, "")),
		one("129 characters", randomKey(129, "")),
		one("colon", randomKey(30, ":")),
		one("slash", randomKey(30, "/")),
		one("plus", randomKey(30, "+")),
		one("inner space", randomKey(15, "")+" "+randomKey(15, "")),
		one("non-ASCII", randomKey(30, "")+"é"),
	}
	return accept, reject
}
