package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestBadEndpointIsAUsageError: an endpoint that is not an http(s) URL
// with a host (a missing scheme, another scheme, no host) is refused when
// the flags are read, naming the flag and the value, with exit 2 and
// nothing on stdout, before any request; dev refuses a bad
// DYNAMODB_ENDPOINT the same way.
func TestBadEndpointIsAUsageError(t *testing.T) {
	for _, bad := range []string{"not-a-url", "127.0.0.1:8000", "ftp://127.0.0.1:8000", "http://", "::bad"} {
		for _, args := range [][]string{
			{"tables", "create", "--endpoint", bad},
			{"doctor", "--endpoint", bad},
			{"apikey", "create", "--tenant", "acme", "--endpoint", bad},
			{"effects", "list", "--endpoint", bad},
			{"effects", "show", "acme/x", "--endpoint", bad},
			{"effects", "resolve", "acme/x", "--as", "delivered", "--rev", "r", "--endpoint", bad},
			{"dev", "--dynamodb-endpoint", bad},
		} {
			var out, errb bytes.Buffer
			code := run(context.Background(), args, &out, &errb)
			if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), bad) || !strings.Contains(errb.String(), "http:// or https:// URL") {
				t.Errorf("idemkit %q: exit %d stdout %q stderr %q, want exit 2 naming the value", args, code, out.String(), errb.String())
			}
		}
	}
	t.Setenv("DYNAMODB_ENDPOINT", "not-a-url")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"dev"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "DYNAMODB_ENDPOINT") || !strings.Contains(errb.String(), "http:// or https:// URL") {
		t.Errorf("DYNAMODB_ENDPOINT=not-a-url idemkit dev: exit %d stdout %q stderr %q, want exit 2 naming the variable", code, out.String(), errb.String())
	}
}
