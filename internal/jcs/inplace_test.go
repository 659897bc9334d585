package jcs

import (
	"crypto/sha256"
	"testing"
)

// TestSum256HashesCanonicalInputInPlace: input already in canonical form is
// validated and hashed as it is, never copied (the digest's output buffer
// stays empty), and the digest is the SHA-256 of the input; input that is
// not canonical is copied where it must change.
func TestSum256HashesCanonicalInputInPlace(t *testing.T) {
	canonical, err := Canonicalize(rowsBody(64 << 10))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		in     []byte
		copied bool
	}{
		{"canonical object", canonical, false},
		{"canonical array", []byte(`[{"a":1,"b":"é"},0.5,-2,"x",true,null,[]]`), false},
		{"canonical scalar", []byte(`"plain"`), false},
		{"whitespace", []byte(`{"a": 1}`), true},
		{"unsorted", []byte(`[{"b":1,"a":2}]`), true},
		{"escape", []byte(`["\u0041"]`), true},
		{"number", []byte(`[1.50]`), true},
	} {
		s := &state{h: sha256.New(), hashing: true, exact: true, data: tc.in}
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if copied := cap(s.dst) > 0; copied != tc.copied {
			t.Errorf("%s: copied = %v, want %v", tc.name, copied, tc.copied)
		}
		want, _ := Canonicalize(tc.in)
		if got := s.h.Sum(nil); string(got) != string(sha256Of(want)) {
			t.Errorf("%s: digest %x, want SHA-256 of %q", tc.name, got, want)
		}
		if !tc.copied && string(want) != string(tc.in) {
			t.Errorf("%s: test input is not canonical", tc.name)
		}
	}
}

func sha256Of(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}
