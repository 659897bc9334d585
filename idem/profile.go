package idem

import "time"

// Profile selects a documented policy: key grammar, default retention,
// response headers and the in-flight Retry-After. The zero value is
// ProfileOpenWOP, the normative default.
//
// Error envelopes always carry the OpenWOP registry code
// (idempotency_key_invalid, idempotency_key_mismatch, idempotency_in_flight,
// ...). A profile whose own documentation names other codes gets them in
// details.profileCode: ProfileERP maps idempotency_in_flight to
// IDEMPOTENCY_REQUEST_IN_PROGRESS and idempotency_key_mismatch to
// IDEMPOTENCY_KEY_CONFLICT.
type Profile int

const (
	// ProfileOpenWOP (the OpenWOP default policy): key ^[A-Za-z0-9._~-]{22,128}$, retention
	// 24 h, replays carry "OpenWOP-Idempotent-Replay: true", in-flight
	// Retry-After is Config.InFlightRetryAfter (1 s) while the owner is
	// alive and the seconds until its lease can be reclaimed when it looks
	// dead.
	ProfileOpenWOP Profile = iota
	// ProfileERP (the ERP service's policy): key 8..128 of A-Z a-z 0-9 . _ : -, retention
	// 720 h; every response carries "Idempotency-Replayed: true|false", the
	// key echoed in "Idempotency-Key", "Idempotency-Original-Request-ID" and
	// "X-Request-ID"; in-flight answers carry "Retry-After: 2".
	ProfileERP
	// ProfileCommerce (the commerce platform's policy): keys of up to 255 visible characters, held
	// forever; replays carry "Idempotent-Replayed: true".
	ProfileCommerce
)

// Response header names set by the profiles.
const (
	HeaderOpenWOPReplay     = "Openwop-Idempotent-Replay" // canonical form of OpenWOP-Idempotent-Replay
	HeaderReplayed          = "Idempotency-Replayed"
	HeaderOriginalRequestID = "Idempotency-Original-Request-Id"
	HeaderRequestID         = "X-Request-Id"
	HeaderIdempotentReplay  = "Idempotent-Replayed"
	HeaderRetryAfter        = "Retry-After"
)

func (p Profile) String() string {
	switch p {
	case ProfileOpenWOP:
		return "openwop"
	case ProfileERP:
		return "erp"
	case ProfileCommerce:
		return "commerce"
	}
	return "unknown"
}

// KeyPolicy returns the profile's key grammar.
func (p Profile) KeyPolicy() KeyPolicy {
	switch p {
	case ProfileERP:
		return KeyERP
	case ProfileCommerce:
		return KeyCommerce
	}
	return KeyOpenWOP
}

// DefaultRetention returns the profile's default retention (Forever for
// ProfileCommerce).
func (p Profile) DefaultRetention() time.Duration {
	switch p {
	case ProfileERP:
		return 720 * time.Hour
	case ProfileCommerce:
		return Forever
	}
	return 24 * time.Hour
}

func (p Profile) valid() bool { return p >= ProfileOpenWOP && p <= ProfileCommerce }

// profileCode maps a registry code to the profile's own code, if any.
func (p Profile) profileCode(code string) string {
	if p != ProfileERP {
		return ""
	}
	switch code {
	case "idempotency_in_flight":
		return "IDEMPOTENCY_REQUEST_IN_PROGRESS"
	case "idempotency_key_mismatch":
		return "IDEMPOTENCY_KEY_CONFLICT"
	}
	return ""
}

// decorate adds the profile's headers to a response of a guarded request
// (a mutating request on a route that is not opted out, idempotency
// enabled), whatever its outcome: replays, first executions, requests
// without a key, and every error answer. replay says whether the response
// came from the cache; key is the valid key ("" when there was none or it
// was invalid: an invalid key is never echoed); originalID is the request id
// of the first claim ("" = this request).
func (p Profile) decorate(h map[string][]string, replay bool, key, requestID, originalID string) {
	switch p {
	case ProfileOpenWOP:
		if replay {
			h[HeaderOpenWOPReplay] = []string{"true"}
		}
	case ProfileERP:
		if replay {
			h[HeaderReplayed] = []string{"true"}
		} else {
			h[HeaderReplayed] = []string{"false"}
		}
		if key != "" {
			h[HeaderKey] = []string{key}
		}
		if originalID == "" {
			originalID = requestID
		}
		h[HeaderOriginalRequestID] = []string{originalID}
		if requestID != "" {
			h[HeaderRequestID] = []string{requestID}
		}
	case ProfileCommerce:
		if replay {
			h[HeaderIdempotentReplay] = []string{"true"}
		}
	}
}
