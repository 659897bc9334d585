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

// sdkNoise is what the SDK's error chain says and a user's message must
// not: retry counts, request ids, the SDK's own framing, and the Go
// packages' labels.
var sdkNoise = []string{"RequestID", "exceeded maximum number of attempts", "operation error", "https response error", "StatusCode", "host: ", "tables: ", "devstack: ", "dynamostore: "}

// refusingEngine is a DynamoDB endpoint that refuses every call with
// AccessDeniedException.
func refusingEngine(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#AccessDeniedException","message":"User is not authorized to perform this action"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// fakeAWSCredentials gives the commands test credentials and no
// DYNAMODB_ENDPOINT, so that only --endpoint names the engine.
func fakeAWSCredentials(t *testing.T) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("DYNAMODB_ENDPOINT", "")
}

// hungEngine is an engine that accepts the connection and never answers
// until the request is given up or the test ends; it returns its URL.
func hungEngine(t *testing.T) string {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv.URL
}

// TestDoctorAndDevSayStoreFailuresPlainly: doctor, dev and the effects
// commands, like the other
// commands (TestUnreachableEngineIsSaidPlainly), say a failed DynamoDB call
// in a user's terms: what the command was doing, the operation, and the
// cause (an engine that cannot be reached, with a hint naming the
// command's own flags; DynamoDB's error code and message), without the
// SDK's retry counts and request ids.
func TestDoctorAndDevSayStoreFailuresPlainly(t *testing.T) {
	fakeAWSCredentials(t)
	refusing := refusingEngine(t)
	for _, c := range []struct {
		name string
		args []string
		says []string
	}{
		{"doctor, unreachable", []string{"doctor", "--endpoint", "http://127.0.0.1:1", "--only", "idempotency"},
			[]string{"idemkit doctor: describe idemkit-IdempotencyTable: DynamoDB DescribeTable failed: cannot reach the engine", "--endpoint and --region"}},
		{"doctor, refused", []string{"doctor", "--endpoint", refusing, "--only", "idempotency"},
			[]string{"idemkit doctor: describe idemkit-IdempotencyTable: DynamoDB DescribeTable failed: AccessDeniedException: User is not authorized to perform this action"}},
		{"dev, unreachable", []string{"dev", "--addr", "127.0.0.1:0", "--dynamodb-endpoint", "http://127.0.0.1:1"},
			[]string{"idemkit dev: create idemkit-ApiKeysTable (ApiKeysTable): DynamoDB CreateTable failed: cannot reach the engine", "is it running, and is --dynamodb-endpoint right?"}},
		{"dev, refused", []string{"dev", "--addr", "127.0.0.1:0", "--dynamodb-endpoint", refusing},
			[]string{"idemkit dev: ", "DynamoDB ", " failed: AccessDeniedException: User is not authorized to perform this action"}},
		// The effects commands: the operation once, not the store
		// package's label and its own name for the call.
		{"effects list, unreachable", []string{"effects", "list", "--run", "acme/run-0123456789abcdef", "--endpoint", "http://127.0.0.1:1"},
			[]string{"idemkit effects list: DynamoDB Query failed: cannot reach the engine", "--endpoint and --region"}},
		{"effects show, refused", []string{"effects", "show", "acme/e1-0123456789abcdef", "--endpoint", refusing},
			[]string{"idemkit effects show: DynamoDB GetItem failed: AccessDeniedException: User is not authorized to perform this action"}},
		// The fence table read first by a fenced resolution: said as the
		// effects table's reads are.
		{"effects resolve with the fence table, unreachable", []string{"effects", "resolve", "acme/e1-0123456789abcdef", "--as", "delivered", "--rev", "r1",
			"--endpoint", "http://127.0.0.1:1", "--fence-table", "F1x", "--fence-region", "us-east-1"},
			[]string{"idemkit effects resolve: DynamoDB GetItem failed: cannot reach the engine", "--endpoint and --region"}},
		{"effects resolve with the fence table, refused", []string{"effects", "resolve", "acme/e1-0123456789abcdef", "--as", "delivered", "--rev", "r1",
			"--endpoint", refusing, "--fence-table", "F1x"},
			[]string{"idemkit effects resolve: DynamoDB ", " failed: AccessDeniedException: User is not authorized to perform this action"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out, errb bytes.Buffer
			code := run(ctx, c.args, &out, &errb)
			msg := errb.String()
			if code != 1 {
				t.Fatalf("exit %d, want 1: %q", code, msg)
			}
			for _, s := range c.says {
				if !strings.Contains(msg, s) {
					t.Errorf("stderr does not say %q: %q", s, msg)
				}
			}
			for _, s := range sdkNoise {
				if strings.Contains(msg, s) {
					t.Errorf("stderr says %q: %q", s, msg)
				}
			}
		})
	}
}
