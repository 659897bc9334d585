package jcs

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
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

// TestSum256ExactCanonical: Sum256ExactCanonical gives Sum256Exact's
// digest and reports canonical only when the input is its own canonical
// form, byte for byte, so that its digest is also the SHA-256 of the
// input, and does for plain canonical input: on generated documents (members in random order, escapes,
// numbers of every form, whitespace) and on their canonical forms, on
// canonical input above the digest's flush size (a top-level array,
// hashed in pieces straight from the input), and on the cases of
// TestSum256HashesCanonicalInputInPlace.
func TestSum256ExactCanonical(t *testing.T) {
	var missed, sameN int
	check := func(in []byte) {
		t.Helper()
		sum, canonical, err := Sum256ExactCanonical(in)
		want, werr := Sum256Exact(in)
		if (err == nil) != (werr == nil) || sum != want {
			t.Fatalf("%q: %x, %v; Sum256Exact %x, %v", in, sum, err, want, werr)
		}
		if err != nil {
			if canonical {
				t.Fatalf("%q: canonical with an error", in)
			}
			return
		}
		form, _ := CanonicalizeExact(in)
		same := string(form) == string(in)
		if canonical && (!same || sum != sha256.Sum256(in)) {
			t.Fatalf("%q: canonical, but its canonical form is %q", in, form)
		}
		if same && !canonical {
			missed++
		}
		if same {
			sameN++
		}
	}
	rows, err := Canonicalize(rowsBody(64 << 10))
	if err != nil {
		t.Fatal(err)
	}
	big := append(append([]byte("["), rows...), ",1,"...)
	big = append(append(big, rows...), ']')
	if len(big) < 2*flushSize {
		t.Fatalf("test input of %d bytes is not above the flush size", len(big))
	}
	for _, in := range [][]byte{
		rows, big, []byte(`[{"a":1,"b":"é"},0.5,-2,"x",true,null,[]]`), []byte(`"plain"`), []byte(`0`), []byte(`{}`), []byte(`[]`),
	} {
		if _, canonical, err := Sum256ExactCanonical(in); err != nil || !canonical {
			t.Fatalf("%.40q: canonical = %v, %v; want true", in, canonical, err)
		}
	}
	for _, in := range [][]byte{
		big[1 : len(big)-1], // not JSON
		[]byte(`{"a": 1}`), []byte(` {"a":1}`), []byte(`{"a":1} `), []byte(`[{"b":1,"a":2}]`), []byte(`{"b":1,"a":2}`),
		[]byte(`["\u0041"]`), []byte(`["\n"]`), []byte(`["\""]`), []byte(`[1.50]`), []byte(`[1e2]`), []byte(`[-0]`), []byte(``),
	} {
		check(in)
	}
	r := rand.New(rand.NewPCG(8785, 2))
	for range 2000 {
		var b bytes.Buffer
		genValue(r, &b, 0)
		check(b.Bytes())
		if form, err := CanonicalizeExact(b.Bytes()); err == nil {
			check(form)
		}
	}
	// Canonical input the digest writes again, to the same text, is not
	// reported (a long or exponent number, a \u00XX escape): the
	// generator makes many of those.
	t.Logf("%d of %d canonical inputs not reported canonical", missed, sameN)
}
