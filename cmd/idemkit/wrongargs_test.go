package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestWrongArgumentsSayWhatIsAccepted: a wrong value of a day-two
// command's flag exits 2 before anything is reached, and its message names
// the value given and every value accepted in the spelling the help uses.
func TestWrongArgumentsSayWhatIsAccepted(t *testing.T) {
	for _, c := range []struct {
		args []string
		says []string
	}{
		{[]string{"effects", "resolve", "acme/e1", "--as", "maybe", "--endpoint", "http://127.0.0.1:1"},
			[]string{`--as "maybe"`, "delivered", "not-delivered"}},
		{[]string{"doctor", "--table", "Bogus=x", "--endpoint", "http://127.0.0.1:1"},
			[]string{"IdempotencyTable", "ApiKeysTable", "idempotency", "api-keys"}},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		if code != 2 {
			t.Fatalf("%v: exit %d, want 2 (%q)", c.args, code, errb.String())
		}
		first := strings.SplitN(errb.String(), "\n", 2)[0]
		for _, s := range c.says {
			if !strings.Contains(first, s) {
				t.Errorf("%v: %q does not name %q", c.args, first, s)
			}
		}
	}
}
