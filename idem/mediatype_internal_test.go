package idem

import (
	"bytes"
	"testing"
)

// TestMediaTypeWithoutAllocatingIsTheParsersForm pins that the media type
// the fingerprint carries, put in canonical form in the fingerprint's own
// buffer for a Content-Type of tokens (appendMediaType, RED_TEAM 334), is
// byte for byte what mime's parser and formatter give (bodyMediaType), so
// a record written under either replays under the other; and that the
// common types take the path without allocating.
func TestMediaTypeWithoutAllocatingIsTheParsersForm(t *testing.T) {
	fast := map[string]bool{
		"application/x-www-form-urlencoded":           true,
		"text/plain":                                  true,
		"text/plain; charset=UTF-8":                   true,
		"Text/Plain;Charset=ISO-8859-1":               true,
		"multipart/form-data; boundary=b1":            true,
		"multipart/form-data;boundary=AbC; x=Y":       true,
		"text/csv; header=present; charset=utf-8":     true,
		"application/octet-stream":                    true,
		"Application/JSON":                            true,
		"application/json; charset=utf-8":             true,
		"application/merge-patch+json":                true,
		"Application/Merge-Patch+JSON; charset=utf-8": true,
		" \ttext/plain ; charset = utf-8 \r\n":        true,
		"text/plain;":                                 true,
		"application/problem+json; ":                  true,
	}
	slow := []string{
		// A JSON type in a charset other than UTF-8 keeps its charset
		// (RED_TEAM 464), parsed.
		"Application/Merge-Patch+JSON; charset=x",
		"application/json; charset=ISO-8859-1",
		`application/json; charset="utf-8"`,
		"application/json; charset=utf-8; charset=latin1",
		`multipart/form-data; boundary="a b"`,
		`text/plain; charset="utf-8"`,
		"text/plain;; charset=utf-8",
		"text/plain; charset=utf-8; Charset=latin1",
		"text/plain; charset=utf-8; charset=utf-8",
		"text/plain; title*=us-ascii'en-us'This%20is",
		"text/plain; a=1; b=2; c=3; d=4; e=5",
		"text",
		"text/",
		"/plain",
		"text/plain/x",
		"text/plain; charset",
		"text/plain; =utf-8",
		"text/plaïn",
		"text/plain; charset=utf\u00a08",
		"not a media type",
		"app lication/json",
	}
	check := func(ct string, wantFast bool) {
		t.Helper()
		in := &request{body: []byte("a=1"), contentType: ct}
		want := []byte("x")
		if mt := bodyMediaType(in); mt != "" {
			want = appendStr(append(want, 'm'), mt)
		}
		if got := appendBodyMediaType([]byte("x"), in); !bytes.Equal(got, want) {
			t.Errorf("%q: %q, want %q (bodyMediaType %q)", ct, got, want, bodyMediaType(in))
		}
		_, ok := appendMediaType(nil, trimASCIISpace(ct))
		if ok != wantFast {
			t.Errorf("%q: without allocating %v, want %v", ct, ok, wantFast)
		}
	}
	for ct := range fast {
		check(ct, true)
	}
	for _, ct := range slow {
		check(ct, false)
	}
}
