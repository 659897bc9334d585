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

// RED_TEAM 461: credentials that may describe a table but not its TTL (or
// point-in-time recovery) printed the table as "error" and dropped what
// DescribeTable had already shown wrong: the key schema here.
func TestDoctorKeepsDifferencesFoundBeforeADeniedCall(t *testing.T) {
	fakeAWSCredentials(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		switch r.Header.Get("X-Amz-Target") {
		case "DynamoDB_20120810.DescribeTable":
			_, _ = w.Write([]byte(`{"Table":{"TableName":"orders-idem","TableStatus":"ACTIVE",` +
				`"AttributeDefinitions":[{"AttributeName":"id","AttributeType":"S"}],` +
				`"KeySchema":[{"AttributeName":"id","KeyType":"HASH"}]}}`))
		default:
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"__type":"com.amazon.coral.service#AccessDeniedException","Message":"User: arn:aws:iam::123456789012:user/ops is not authorized to perform: dynamodb:DescribeTimeToLive on resource: orders-idem"}`))
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"doctor", "--endpoint", srv.URL, "--table", "IdempotencyTable=orders-idem", "--only", "IdempotencyTable"}, &out, &errb)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if !strings.Contains(out.String(), "IdempotencyTable\torders-idem\terror\n") || !strings.Contains(out.String(), "  - key schema: template ") {
		t.Errorf("stdout %q: want the table as error with its key schema difference", out.String())
	}
	if !strings.Contains(errb.String(), "dynamodb:DescribeTimeToLive") {
		t.Errorf("stderr %q: want the refused permission named", errb.String())
	}
}
