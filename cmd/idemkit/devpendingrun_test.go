package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDevCommercePendingActionNamesOnlyARunThatExists: behind `idemkit dev
// --policy commerce` (the reference host, its run written in the
// completion transaction) a duplicate of a create still executing
// (conformance-delay holds it) is answered at once, Idempotency-Mode:
// async, with the pending answer, and every run any answer names exists
// when it is named: a create refused because a live run holds its scope
// (409 run_already_active, which the policy forgets) names none, and a
// create answered 201 names its run once it is written (its answer, its
// replay), never before. On every engine with streams, at once (each a dev
// of its own): each one's time is mostly the held creates' delay.
func TestDevCommercePendingActionNamesOnlyARunThatExists(t *testing.T) {
	dynamotest.ForEachWithConcurrently(t, dynamotest.Streams, devCommercePendingActionNamesOnlyARunThatExists)
}

type answer struct {
	r *http.Response
	m map[string]any
}

// send POSTs body to url with the header pairs (an empty value is not
// sent), from any goroutine.
func send(url, body string, header ...string) (answer, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return answer{resp, m}, nil
}

func devCommercePendingActionNamesOnlyARunThatExists(t *testing.T, e *dynamotest.Emulator) {
	hold := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hold)
	prefix := fmt.Sprintf("polpending%d-", time.Now().UnixNano())
	key := "idk_policyobj_pendingrun_0123456789"
	_, url := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--api-key", key+"=acme", "--policy", "commerce", "--allow-loopback-webhooks")
	// claims counts the items of dev's idempotency table (a consistent
	// scan): a first claim adds one.
	db := e.Client()
	claims := func(t *testing.T) int32 {
		out, err := db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(prefix + "IdempotencyTable"), Select: types.SelectCount, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Count
	}
	auth := []string{"Authorization", testutil.Bearer(key)}
	post := func(t *testing.T, ik, mode, body string, enforce bool) (*http.Response, map[string]any) {
		hdr := append([]string{"Idempotency-Key", ik}, auth...)
		if mode != "" {
			hdr = append(hdr, "Idempotency-Mode", mode)
		}
		if enforce {
			hdr = append(hdr, "OpenWOP-Dedup", "enforce")
		}
		return testutil.DoJSON(t, "POST", url+"/runs", body, hdr...)
	}
	exists := func(t *testing.T, id string) int {
		r, _ := testutil.DoJSON(t, "GET", url+"/runs/"+projected(id), "", auth...)
		return r.StatusCode
	}
	// The scope's holder: a live run (its webhook delivery hangs).
	if r, m := post(t, "pending run scope holder", "", `{"workflowId":"webhook","inputs":{"url":"`+slow.URL+`/hook","payload":{}},"scopeId":"order-9"}`, true); r.StatusCode != 201 {
		t.Fatalf("the scope's holder: %d %v", r.StatusCode, m)
	}
	cases := []struct {
		name, key, body string
		enforce         bool
		status          int
	}{
		{"create refused, scope held", "pending run scope refused", `{"workflowId":"conformance-delay","inputs":{"delayMs":4000},"scopeId":"order-9"}`, true, 409},
		{"create answered 201", "pending run created", `{"workflowId":"conformance-delay","inputs":{"delayMs":4000}}`, false, 201},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			devPendingRunCase(t, url, post, exists, claims, c.key, c.body, c.enforce, c.status, auth)
		})
	}
}

// devPendingRunCase sends the create under key, waits until its record is
// claimed (claims, the items of the idempotency table, grows past before),
// then sends async duplicates until one is answered the pending answer or
// the create ends: every run an answer names must exist when it is named.
func devPendingRunCase(t *testing.T, url string, post func(t *testing.T, ik, mode, body string, enforce bool) (*http.Response, map[string]any), exists func(t *testing.T, id string) int,
	claims func(t *testing.T) int32, key, body string, enforce bool, status int, auth []string) {
	before := claims(t)
	firstc := make(chan answer, 1)
	hdr := append([]string{"Idempotency-Key", key}, auth...)
	if enforce {
		hdr = append(hdr, "OpenWOP-Dedup", "enforce")
	}
	go func() {
		a, err := send(url+"/runs", body, hdr...)
		if err != nil {
			a = answer{&http.Response{StatusCode: 599, Header: http.Header{}}, map[string]any{"error": err.Error()}}
		}
		firstc <- a
	}()
	var first *answer
	for first == nil && claims(t) <= before {
		select {
		case a := <-firstc:
			first = &a
		default:
		}
	}
	pending := 0
	for first == nil && pending == 0 {
		r, m := post(t, key, "async", body, enforce)
		if r.StatusCode == http.StatusAccepted {
			pending++
			if r.Header.Get("Retry-After") == "" || r.Header.Get("Idempotent-Replayed") != "true" || m["status"] != "pending" {
				t.Errorf("a duplicate in flight: %d %v %v, want the pending answer", r.StatusCode, r.Header, m)
			}
		}
		if id, _ := m["runId"].(string); id != "" {
			if s := exists(t, id); s != http.StatusOK {
				t.Errorf("a duplicate (%d) named run %s, which is not written (GET %d)", r.StatusCode, id, s)
			}
		}
		select {
		case a := <-firstc:
			first = &a
		default:
		}
	}
	if first == nil {
		a := <-firstc
		first = &a
	}
	if pending == 0 {
		t.Fatalf("no duplicate met the create in flight (its hold is 4 s; first answered %d)", first.r.StatusCode)
	}
	if first.r.StatusCode != status {
		t.Fatalf("first: %d %v, want %d", first.r.StatusCode, first.m, status)
	}
	r, m := post(t, key, "async", body, enforce)
	for _, a := range []answer{*first, {r, m}} {
		id, _ := a.m["runId"].(string)
		if (status == http.StatusCreated) != (id != "") {
			t.Errorf("an answer %d names run %q", a.r.StatusCode, id)
		}
		if id != "" {
			if s := exists(t, id); s != http.StatusOK {
				t.Errorf("an answer %d named run %s, which does not exist (GET %d)", a.r.StatusCode, id, s)
			}
		}
	}
}
