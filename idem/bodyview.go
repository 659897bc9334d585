package idem

import "unsafe"

// A request body that arrives as a string, and a replayed response body
// that leaves as one, are not copied between string and bytes.
//
// An API Gateway text body arrives as a string. The protocol only reads
// the body (its digest, its canonical form, the raw body's hash, a
// tenant member), so the request views the string's bytes in place
// instead of copying them: a 1 KB body was a third of the bytes a replay
// allocated. Code outside this package (Contract.Decode, Route.DeriveKey)
// may write to the slice it is given, so it gets a copy (userBody).

// bodyView returns the bytes of s without copying them. They must never
// be written: a string's bytes may be read-only memory.
func bodyView(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// userBody returns the request body for code outside this package: a
// copy when the body is a view of the event's string, else the body.
func (in *request) userBody() []byte {
	if !in.bodyView {
		return in.body
	}
	b := make([]byte, len(in.body))
	copy(b, in.body)
	return b
}

// A replayed response's body is the bytes of the record the store
// returned, which are the caller's (Store.Claim, Store.Get) and written by
// nobody once the replay is answered; the API Gateway adapters return
// them as the response's body string (request.replayText) instead of
// copying them, as they reuse a handler's own body string.

// The digest, the record ID, the owner token and the raw body's hex hash
// of a keyed request are views of one buffer (txn.names), each part
// written once before it is viewed.

// bodyString returns b as a string without copying it. b must never be
// written again.
func bodyString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
