package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestDevERPKeyWhitespaceRejectedAsReceived: behind `idemkit dev --policy
// erp` the gateway hands the handler the Idempotency-Key as received, like
// API Gateway's HTTP API, so a key with leading or trailing whitespace is
// 400 idempotency_key_invalid, and the next request on the same connection
// with a clean key runs (201).
func TestDevERPKeyWhitespaceRejectedAsReceived(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("devraw%d-", time.Now().UnixNano())
	const key = "idk_raw_test_0123456789"
	_, url := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--api-key", key+"=acme", "--policy", "erp")
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	body := `{"workflowId":"conformance-noop"}`
	send := func(ik string) *http.Response {
		t.Helper()
		req := "POST /runs HTTP/1.1\r\nHost: dev\r\nAuthorization: Bearer " + key + "\r\nContent-Type: application/json\r\n" +
			"Idempotency-Key: " + ik + "\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body
		if _, err := conn.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, resp.ContentLength)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, ik := range []string{" ERP-ORDER-RAW-1", "ERP-ORDER-RAW-1 ", "\tERP-ORDER-RAW-1"} {
		if r := send(ik); r.StatusCode != 400 {
			t.Fatalf("key %q: %d, want 400", ik, r.StatusCode)
		}
	}
	if r := send("ERP-ORDER-RAW-1"); r.StatusCode != 201 {
		t.Fatalf("clean key on the same connection: %d, want 201", r.StatusCode)
	}
}
