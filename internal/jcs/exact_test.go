package jcs

import (
	"errors"
	"testing"
)

func TestCanonicalizeExact(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string // "" = rejected with ErrInexactNumber
		ptr  string
	}{
		{`1.0`, `1`, ""},
		{`[1e2, 0.1, 1E-1, -0, 0e-99999999999999999999]`, `[100,0.1,0.1,0,0]`, ""},
		{`12345678901234567000`, `12345678901234567000`, ""},
		{`9007199254740992.000`, `9007199254740992`, ""},
		{`0.30000000000000004`, `0.30000000000000004`, ""},
		{`1e21`, `1e+21`, ""},
		{`-1.5e-7`, `-1.5e-7`, ""},
		{`5e-324`, `5e-324`, ""},
		{`{"amount":12345678901234567890}`, "", "/amount"},
		{`{"amount":0.10000000000000000001}`, "", "/amount"},
		{`{"a":[{"b":1},{"c":1152921504606846976}]}`, "", "/a/1/c"},
		{`{"x":{"y":"1"}, "z/~":[true,null,{"q":1e-400}]}`, "", "/z~1~0/2/q"},
		{`[9007199254740993]`, "", "/0"},
		{`99999999999999999`, "", ""},
		{`{"a":{},"b":[[],[]],"c":[0,2e-400]}`, "", "/c/1"},
	} {
		out, err := CanonicalizeExact([]byte(c.in))
		if c.want != "" {
			if err != nil || string(out) != c.want {
				t.Fatalf("%s: %s %v, want %s", c.in, out, err, c.want)
			}
			continue
		}
		var je *Error
		if !errors.Is(err, ErrInexactNumber) || !errors.As(err, &je) {
			t.Fatalf("%s: err = %v, want ErrInexactNumber", c.in, err)
		}
		ptr, ok := Pointer([]byte(c.in), je.Offset)
		if !ok || ptr != c.ptr {
			t.Fatalf("%s: pointer %q %v, want %q", c.in, ptr, ok, c.ptr)
		}
		// The non-exact forms accept it (RFC 8785 rounds to a double).
		if _, err := Canonicalize([]byte(c.in)); err != nil {
			t.Fatalf("%s: Canonicalize: %v", c.in, err)
		}
		if _, err := Sum256Exact([]byte(c.in)); !errors.Is(err, ErrInexactNumber) {
			t.Fatalf("%s: Sum256Exact: %v", c.in, err)
		}
	}
}

func TestPointerNoValueAtOffset(t *testing.T) {
	if _, ok := Pointer([]byte(`{"a": 1}`), 3); ok {
		t.Fatal("offset inside a member name named a value")
	}
	if p, ok := Pointer([]byte(`{"a": 1}`), 0); !ok || p != "" {
		t.Fatalf("top-level: %q %v", p, ok)
	}
}

// FuzzCanonicalizeExact: whatever CanonicalizeExact accepts, its output is
// what Canonicalize gives, and the output is its own exact canonical form;
// every rejection is an inexact number that Canonicalize accepts, at an
// offset Pointer can name.
func FuzzCanonicalizeExact(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `12345678901234567890`, `[0.1,1e-400]`, `{"a":[1,{"b":2.50}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		plain, perr := Canonicalize(in)
		out, err := CanonicalizeExact(in)
		if err == nil {
			if perr != nil || string(out) != string(plain) {
				t.Fatalf("exact %q vs plain %q (%v)", out, plain, perr)
			}
			again, err := CanonicalizeExact(out)
			if err != nil || string(again) != string(out) {
				t.Fatalf("not idempotent: %q -> %q %v", out, again, err)
			}
			return
		}
		if !errors.Is(err, ErrInexactNumber) {
			if perr == nil {
				t.Fatalf("exact rejected what plain accepts: %v", err)
			}
			return
		}
		var je *Error
		errors.As(err, &je)
		if _, ok := Pointer(in, je.Offset); !ok {
			t.Fatalf("no pointer for offset %d in %q", je.Offset, in)
		}
	})
}
