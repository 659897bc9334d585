package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestEndpointPasswordIsNotPrinted: a URL given with a password in it
// (`--endpoint http://user:PASS@host`, conform's URL) never has that
// password printed back by a command's run-time error, which goes to
// stderr (a CI log, a shared terminal); the line still names the host
// (RED_TEAM 434). Before, "no key ... in table T at
// http://user:PASS@host" and "cannot reach http://user:PASS@host" quoted it.
func TestEndpointPasswordIsNotPrinted(t *testing.T) {
	const pass = "s3cretPW0rd"
	t.Setenv("IDEMKIT_STATE_DIR", t.TempDir())
	// An engine that speaks DynamoDB's protocol and holds no table.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("x-amzn-RequestId", "req-1")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}`))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	ep := "http://operator:" + pass + "@" + host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, args := range [][]string{
		{"apikey", "create", "--tenant", "acme", "--endpoint", ep},
		{"apikey", "revoke", "--hash", strings.Repeat("0", 64), "--endpoint", ep},
		{"webhook", "secret", "rotate", "--tenant", "acme", "--endpoint", ep},
		{"webhook", "secret", "remove", "--tenant", "acme", "--endpoint", ep},
		{"effects", "list", "--endpoint", ep},
		{"conform", "--api-key", "k-0123456789abcdef", "http://operator:" + pass + "@" + closed},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		if code != 1 || strings.Contains(out.String()+errb.String(), pass) {
			t.Errorf("idemkit %q: exit %d stdout %q stderr %q; want exit 1 and the password nowhere", args, code, out.String(), errb.String())
		}
		h := host
		if args[0] == "conform" {
			h = closed
		}
		if !strings.Contains(errb.String(), h) {
			t.Errorf("idemkit %q: stderr %q does not name the host %s", args, errb.String(), h)
		}
	}
}

// TestRefusedURLPasswordIsNotPrinted: a usage error quoting a refused URL
// (an endpoint or API URL that is not http(s), DYNAMODB_ENDPOINT's) does
// not quote a password given in it either (RED_TEAM 434).
func TestRefusedURLPasswordIsNotPrinted(t *testing.T) {
	const pass = "s3cretPW0rd"
	bad := "ftp://operator:" + pass + "@127.0.0.1:9"
	for _, c := range []struct {
		args []string
		env  string
	}{
		{args: []string{"tables", "create", "--endpoint", bad}},
		{args: []string{"effects", "list", "--endpoint=" + bad}},
		{args: []string{"dev", "--dynamodb-endpoint", bad}},
		{args: []string{"conform", "--api-key", "k-0123456789abcdef", bad}},
		{args: []string{"dev"}, env: bad},
	} {
		t.Setenv("DYNAMODB_ENDPOINT", c.env)
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		if code != 2 || strings.Contains(errb.String(), pass) || !strings.Contains(errb.String(), "127.0.0.1:9") {
			t.Errorf("idemkit %q (DYNAMODB_ENDPOINT=%q): exit %d stderr %q; want exit 2 naming the host, not the password", c.args, c.env, code, errb.String())
		}
	}
}
