package jcs

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

// FuzzCanonicalize checks, for any input: no panic; an accepted input yields
// valid JSON that is a fixed point of Canonicalize and that encoding/json
// decodes to the same value as the input; JSON that encoding/json rejects is
// rejected; JSON that it accepts is never reported as a *SyntaxError (only as
// one of the I-JSON sentinels). Seeds: testdata/fuzz/FuzzCanonicalize.
func FuzzCanonicalize(f *testing.F) {
	f.Add([]byte(`{"b":[1,2.50,"x\u0041"],"a":{"d":null,"c":true}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Canonicalize(in)
		valid := json.Valid(in)
		if err != nil {
			var se *SyntaxError
			if errors.As(err, &se) && valid {
				t.Fatalf("valid JSON %q reported as syntax error: %v", in, err)
			}
			if se == nil && !errors.Is(err, ErrDuplicateKey) && !errors.Is(err, ErrLoneSurrogate) &&
				!errors.Is(err, ErrInvalidUTF8) && !errors.Is(err, ErrNumber) && !errors.Is(err, ErrTooDeep) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !valid {
			t.Fatalf("accepted invalid JSON %q -> %q", in, out)
		}
		if !json.Valid(out) {
			t.Fatalf("output is not valid JSON: %q -> %q", in, out)
		}
		again, err := Canonicalize(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, out, again, err)
		}
		var a, b any
		if err := json.Unmarshal(in, &a); err != nil {
			t.Fatalf("encoding/json cannot read accepted input %q: %v", in, err)
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("encoding/json cannot read output %q: %v", out, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("value changed: %q -> %q", in, out)
		}
	})
}
