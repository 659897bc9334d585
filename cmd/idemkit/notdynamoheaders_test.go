package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAnswerWithoutDynamoDBsHeadersIsRefused: an --endpoint whose answer
// carries neither an x-amzn-RequestId header nor a Content-Type of
// application/x-amz-json-1.0 (or -1.1) is no DynamoDB answer, whatever its
// body: every command refuses it before it reports anything (exit 1,
// nothing on stdout), saying the endpoint answered but not as DynamoDB
// does, which endpoint, and what to check. `apikey create` and `webhook
// secret rotate` against a server answering `200 {}` printed a key and a
// secret stored nowhere, exit 0 (RED_TEAM 372; PutItem's and GetItem's
// answers may be `{}` on every engine, so only the headers tell).
func TestAnswerWithoutDynamoDBsHeadersIsRefused(t *testing.T) {
	fakeAWSCredentials(t)
	for _, s := range []struct {
		name, ctype, body string
	}{
		{"200 {} as application/json", "application/json", `{}`},
		{"200 {} without a Content-Type", "", `{}`},
		{"an item as text/plain", "text/plain; charset=utf-8", `{"Item":{}}`},
		{"a lookalike Content-Type", "application/x-amz-json-1.2", `{}`},
	} {
		var calls int
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls++
			w.Header()["Content-Type"] = nil // no Content-Type unless set: net/http would sniff one
			if s.ctype != "" {
				w.Header().Set("Content-Type", s.ctype)
			}
			_, _ = w.Write([]byte(s.body))
		}))
		for _, args := range [][]string{
			{"apikey", "create", "--tenant", "acme"},
			{"webhook", "secret", "rotate", "--tenant", "acme"},
			{"webhook", "secret", "rotate", "--tenant", "acme", "--grace", "0"},
			{"webhook", "secret", "remove", "--tenant", "acme"},
			{"apikey", "revoke", "--hash", strings.Repeat("0", 64)},
			{"effects", "list"},
			{"effects", "show", "acme/e-0123456789abcdefghij"},
			{"tables", "create", "--only", "idempotency"},
			{"doctor", "--only", "idempotency"},
		} {
			args = append(args, "--endpoint", srv.URL)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			var out, errb bytes.Buffer
			code := run(ctx, args, &out, &errb)
			cancel()
			msg := errb.String()
			for _, want := range []string{
				"the endpoint answered 200 OK, which is no DynamoDB answer",
				srv.URL + " sent neither",
				"x-amzn-RequestId", "application/x-amz-json-1.0",
				"--endpoint and --region",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("%s: idemkit %v: stderr %q; want %q", s.name, args, msg, want)
				}
			}
			stdout := out.String()
			if args[0] == "doctor" { // its report: the table's row says error
				stdout = strings.TrimSuffix(stdout, "IdempotencyTable\tidemkit-IdempotencyTable\terror\n")
			}
			if code != 1 || stdout != "" || strings.Count(msg, "\n") != 1 {
				t.Errorf("%s: idemkit %v: exit %d, stdout %q, stderr %q; want 1, nothing on stdout, one line", s.name, args, code, out.String(), msg)
			}
			for _, n := range append(sdkNoise, "deserialization", "UnknownError", "may have") {
				if strings.Contains(msg, n) {
					t.Errorf("%s: idemkit %v: stderr says %q: %q", s.name, args, n, msg)
				}
			}
		}
		srv.Close()
		if calls == 0 {
			t.Errorf("%s: the server was never asked", s.name)
		}
	}
}

// TestAnswerWithDynamoDBsHeadersIsAccepted: an engine speaking DynamoDB's
// wire protocol is recognised by either header alone: x-amzn-RequestId
// with any Content-Type, or a Content-Type of application/x-amz-json-1.0
// or -1.1 in any case, with parameters. `{}` is then a PutItem's answer,
// and `apikey create` prints its key (the engine stored it, as far as any
// answer can say).
func TestAnswerWithDynamoDBsHeadersIsAccepted(t *testing.T) {
	fakeAWSCredentials(t)
	for _, h := range []map[string]string{
		{"x-amzn-RequestId": "R1", "Content-Type": "application/json"},
		{"X-Amzn-Requestid": "R2"},
		{"Content-Type": "application/x-amz-json-1.0"},
		{"Content-Type": "application/x-amz-json-1.1"},
		{"Content-Type": "Application/X-Amz-Json-1.0; charset=UTF-8"},
		{"Content-Type": " application/x-amz-json-1.1 ;charset=utf-8"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = nil
			for k, v := range h {
				w.Header()[k] = []string{v}
			}
			_, _ = w.Write([]byte(`{}`))
		}))
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"apikey", "create", "--tenant", "acme", "--endpoint", srv.URL}, &out, &errb)
		srv.Close()
		if code != 0 || out.Len() == 0 {
			t.Errorf("headers %v: apikey create: exit %d, stdout %q, stderr %q; want 0 and the key", h, code, out.String(), errb.String())
		}
	}
}

// TestGatewayAnswerWithoutDynamoDBsHeadersIsStillRetried: the refusal of
// an answer without DynamoDB's headers keeps the answer's status, so the
// SDK's retry and the lost-answer rules judge it as before: a gateway's
// 503 page in front of an engine is retried, and the engine's answer to
// the retry is the command's (the key printed); a web server's 500 page,
// retried until the SDK gives up, is no answer that may have stored the
// key (no "may have stored" note).
func TestGatewayAnswerWithoutDynamoDBsHeadersIsStillRetried(t *testing.T) {
	fakeAWSCredentials(t)
	for _, c := range []struct {
		name   string
		status int
		pages  int // answers without DynamoDB's headers before the engine's
		code   int
		calls  int // at least, the SDK's tries
	}{
		{"a gateway's 503, then the engine", 503, 1, 0, 2},
		{"a web server's 500 on every try", 500, 99, 1, 3},
	} {
		var calls int
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls++
			if calls <= c.pages {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte("<html><body>Service Unavailable</body></html>"))
				return
			}
			w.Header().Set("x-amzn-RequestId", "R1")
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			_, _ = w.Write([]byte(`{}`))
		}))
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"apikey", "create", "--tenant", "acme", "--endpoint", srv.URL}, &out, &errb)
		srv.Close()
		if code != c.code || calls < c.calls || c.pages == 1 && calls != c.calls || (code == 0) != (out.Len() > 0) || strings.Contains(errb.String(), "may have") {
			t.Errorf("%s: apikey create: exit %d after %d calls, stdout %q, stderr %q; want exit %d after %d calls or more", c.name, code, calls, out.String(), errb.String(), c.code, c.calls)
		}
		if code == 1 && !strings.Contains(errb.String(), "the endpoint answered 500 Internal Server Error, which is no DynamoDB answer: "+srv.URL) {
			t.Errorf("%s: stderr %q", c.name, errb.String())
		}
	}
}
