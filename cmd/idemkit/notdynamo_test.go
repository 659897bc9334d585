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

// TestEndpointThatIsNotDynamoDBIsSaidPlainly: an --endpoint that answers
// HTTP but not as DynamoDB does (the API's address given for the engine's,
// which idemkit dev prints side by side; a web server; a proxy's error
// page) is said in a user's terms: the status it answered, that this is no
// DynamoDB answer, and the command's hint; never the SDK's chain
// ("deserialization failed, failed to decode response body, invalid
// character '<'", "UnknownError: UnknownError").
func TestEndpointThatIsNotDynamoDBIsSaidPlainly(t *testing.T) {
	fakeAWSCredentials(t)
	for _, s := range []struct {
		name, status, ctype, body string
		code                      int
	}{
		{"an HTML error page", "501 Not Implemented", "text/html", "<html><body>Unsupported method ('POST')</body></html>", 501},
		{"an empty 404", "404 Not Found", "", "", 404},
		{"the idemkit API", "401 Unauthorized", "application/json", `{"error":"unauthenticated","message":"missing or invalid credentials"}`, 401},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s.ctype != "" {
				w.Header().Set("Content-Type", s.ctype)
			}
			w.WriteHeader(s.code)
			_, _ = w.Write([]byte(s.body))
		}))
		for _, c := range []struct {
			args []string
			says string
		}{
			{[]string{"effects", "list", "--endpoint", srv.URL}, "idemkit effects list: DynamoDB Scan failed: "},
			{[]string{"doctor", "--only", "idempotency", "--endpoint", srv.URL}, "idemkit doctor: describe idemkit-IdempotencyTable: DynamoDB DescribeTable failed: "},
			{[]string{"apikey", "create", "--tenant", "acme", "--endpoint", srv.URL}, "idemkit apikey create: put api key: DynamoDB PutItem failed: "},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			var out, errb bytes.Buffer
			code := run(ctx, c.args, &out, &errb)
			cancel()
			msg := errb.String()
			want := "the endpoint answered " + s.status + ", which is no DynamoDB answer"
			if code != 1 || !strings.Contains(msg, c.says+want) || !strings.Contains(msg, "--endpoint and --region") {
				t.Errorf("%s: idemkit %v: exit %d, stderr %q; want 1 and %q", s.name, c.args, code, msg, c.says+want)
			}
			for _, n := range append(sdkNoise, "deserialization", "UnknownError", "invalid character") {
				if strings.Contains(msg, n) {
					t.Errorf("%s: idemkit %v: stderr says %q: %q", s.name, c.args, n, msg)
				}
			}
		}
		srv.Close()
	}
	// A JSON 200 with DynamoDB's Content-Type reads as an answer to most
	// calls (a Scan of no items); DescribeTable's names a table, and doctor
	// said no such answer with a Go panic. (Without DynamoDB's headers the
	// answer is refused before it is read: TestAnswerWithoutDynamoDBsHeadersIsRefused.)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"doctor", "--only", "idempotency", "--endpoint", srv.URL}, &out, &errb)
	want := "idemkit doctor: describe idemkit-IdempotencyTable: the endpoint's DescribeTable answer describes no table, which is no DynamoDB answer"
	if code != 1 || !strings.Contains(errb.String(), want) || strings.Contains(errb.String(), "tables: ") {
		t.Errorf("doctor against a JSON 200: exit %d, stderr %q; want 1 and %q", code, errb.String(), want)
	}
}

// TestJSONAnswerThatIsNoDynamoDBAnswerIsAFailure: an --endpoint that
// answers every call 200 with JSON that is no DynamoDB answer (`{}`, an
// API's health document) is a failure said as for any answer that is not
// DynamoDB's (exit 1, the status, "no DynamoDB answer"), wherever
// DynamoDB's answer always carries what this one lacks: a Scan's or
// Query's Items (never an empty table or run), a CreateTable's table
// description (never a wait for the table to become ACTIVE), a
// conditional DeleteItem's old item (never "revoked" with no tenant).
func TestJSONAnswerThatIsNoDynamoDBAnswerIsAFailure(t *testing.T) {
	fakeAWSCredentials(t)
	for _, body := range []string{`{}`, `{"status":"ok"}`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			_, _ = w.Write([]byte(body))
		}))
		for _, c := range []struct {
			args []string
			says string
		}{
			{[]string{"effects", "list", "--endpoint", srv.URL}, "idemkit effects list: DynamoDB Scan failed: "},
			{[]string{"effects", "list", "--state", "escaped", "--endpoint", srv.URL}, "idemkit effects list: DynamoDB Scan failed: "},
			{[]string{"effects", "list", "--run", "acme/r-0123456789abcdefghij", "--endpoint", srv.URL}, "DynamoDB Query failed: "},
			{[]string{"tables", "create", "--only", "idempotency", "--endpoint", srv.URL}, "DynamoDB CreateTable failed: "},
			{[]string{"apikey", "revoke", "--hash", strings.Repeat("0", 64), "--endpoint", srv.URL}, "DynamoDB DeleteItem failed: "},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			var out, errb bytes.Buffer
			code := run(ctx, c.args, &out, &errb)
			cancel()
			msg := errb.String()
			want := "the endpoint answered 200 OK, which is no DynamoDB answer"
			if code != 1 || out.Len() != 0 || !strings.Contains(msg, c.says) || !strings.Contains(msg, want) {
				t.Errorf("%s: idemkit %v: exit %d, stdout %q, stderr %q; want 1, nothing on stdout, and %q", body, c.args, code, out.String(), msg, c.says+want)
			}
			for _, n := range append(sdkNoise, "deserialization", "UnknownError") {
				if strings.Contains(msg, n) {
					t.Errorf("%s: idemkit %v: stderr says %q: %q", body, c.args, n, msg)
				}
			}
		}
		srv.Close()
	}
}
