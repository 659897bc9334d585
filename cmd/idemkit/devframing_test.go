package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// The tests of this file speak raw HTTP/1.1 to `idemkit dev` (pipelined
// requests, chunked bodies, folded header lines, a lowercase method), which
// Go's client never writes, under every policy on every engine with streams
// (DynamoDB Local and moto).

// devPolicies are the policies `idemkit dev --policy` serves.
var devPolicies = []string{"openwop", "commerce", "erp"}

// rawDev is one `idemkit dev --policy policy` on its own tables.
type rawDev struct {
	e      *dynamotest.Emulator
	policy string
	addr   string // host:port
	apiKey string
	prefix string
}

// forEachRawDev runs fn against a fresh `idemkit dev` per policy on every
// engine with streams.
func forEachRawDev(t *testing.T, fn func(t *testing.T, d *rawDev)) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		for _, policy := range devPolicies {
			t.Run(policy, func(t *testing.T) {
				d := &rawDev{e: e, policy: policy, apiKey: "idk_framing_test_0123456789",
					prefix: fmt.Sprintf("framing-%s-%d-", policy, time.Now().UnixNano())}
				_, url := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", d.prefix,
					"--api-key", d.apiKey+"=acme", "--policy", policy)
				d.addr = strings.TrimPrefix(url, "http://")
				fn(t, d)
			})
		}
	})
}

// rawAnswer is one response read off a raw connection.
type rawAnswer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (a rawAnswer) str(name string) string { s, _ := a.body[name].(string); return s }

// exchange writes wire to a new connection in one write and reads n
// responses from it.
func (d *rawDev) exchange(t *testing.T, wire string, n int) []rawAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", d.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	if _, err := conn.Write([]byte(wire)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var out []rawAnswer
	for i := 0; i < n; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d of %d: %v", i+1, n, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("response %d of %d: body: %v", i+1, n, err)
		}
		a := rawAnswer{status: resp.StatusCode, header: resp.Header, raw: string(b)}
		_ = json.Unmarshal(b, &a.body)
		out = append(out, a)
	}
	return out
}

// createRunBody is a createRun body that runs nothing external.
const createRunBody = `{"workflowId":"conformance-noop"}`

// postRuns is a raw POST /runs with the credential, the key (none when "")
// and the body framed by Content-Length.
func (d *rawDev) postRuns(key, body string) string {
	k := ""
	if key != "" {
		k = "Idempotency-Key: " + key + "\r\n"
	}
	return "POST /runs HTTP/1.1\r\nHost: dev\r\nAuthorization: Bearer " + d.apiKey + "\r\nContent-Type: application/json\r\n" + k +
		"Content-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body
}

// runCount is the number of runs in the dev's runs table.
func (d *rawDev) runCount(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := dynamodb.NewScanPaginator(d.e.Client(), &dynamodb.ScanInput{TableName: aws.String(d.prefix + "RunsTable"), ConsistentRead: aws.Bool(true)})
	n := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			if _, ok := it["workflowId"]; ok {
				n++
			}
		}
	}
	return n
}

// uniqueKey is a key valid under every policy.
func uniqueKey(name string) string {
	return fmt.Sprintf("%s-%d-%s", name, time.Now().UnixNano(), "0123456789abcdef")
}

// wantEnvelope fails unless a is status with the error code, in the
// policy's envelope: under the ERP policy the body's request_id is the
// answer's X-Request-ID.
func (d *rawDev) wantEnvelope(t *testing.T, what string, a rawAnswer, status int, code string) {
	t.Helper()
	if a.status != status || a.str("error") != code || a.str("message") == "" {
		t.Fatalf("%s: %d %s, want %d with error %q and a message", what, a.status, a.raw, status, code)
	}
	if !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s: Content-Type %q, want application/json", what, a.header.Get("Content-Type"))
	}
	if d.policy == "erp" {
		if id := a.str("request_id"); id == "" || id != a.header.Get("X-Request-ID") {
			t.Fatalf("%s: request_id %q, X-Request-ID %q: want both, equal (the ERP envelope)", what, id, a.header.Get("X-Request-ID"))
		}
	}
}

// TestDevPipelinedRequestsEachRunUnderTheirOwnKey: two POST /runs
// pipelined on one connection with keys K1 and K2 each run under their own
// key: two runs, and a retry of each (on another connection) replays its
// own run; the runs table holds exactly one run per key.
func TestDevPipelinedRequestsEachRunUnderTheirOwnKey(t *testing.T) {
	forEachRawDev(t, func(t *testing.T, d *rawDev) {
		k1, k2, k3 := uniqueKey("pipelined-one"), uniqueKey("pipelined-two"), uniqueKey("pipelined-three")
		got := d.exchange(t, d.postRuns(k1, createRunBody)+d.postRuns(k2, createRunBody)+d.postRuns(k3, createRunBody), 3)
		for i, a := range got {
			if a.status != http.StatusCreated || a.str("runId") == "" {
				t.Fatalf("pipelined request %d: %d %s, want 201 with a runId", i+1, a.status, a.raw)
			}
		}
		ids := map[string]bool{}
		for i, k := range []string{k1, k2, k3} {
			ids[got[i].str("runId")] = true
			retry := d.exchange(t, d.postRuns(k, createRunBody), 1)[0]
			if retry.status >= 300 || retry.str("runId") != got[i].str("runId") {
				t.Fatalf("retry of pipelined request %d with its key: %d runId %q, want the replay of runId %q", i+1, retry.status, retry.str("runId"), got[i].str("runId"))
			}
		}
		if len(ids) != 3 {
			t.Fatalf("three pipelined requests with three keys made runs %v, want three different runs", ids)
		}
		if n := d.runCount(t); n != 3 {
			t.Fatalf("runs table holds %d runs, want 3 (one per key)", n)
		}
	})
}

// TestDevBodyThatLooksLikeHeadersChangesNothing: a body whose raw bytes
// hold a request line and a header block with another Idempotency-Key
// changes nothing: the request runs under its own key (a retry replays
// it, the body's key is still unused), and a body with an invalid key in
// such a block is not refused for that key.
func TestDevBodyThatLooksLikeHeadersChangesNothing(t *testing.T) {
	forEachRawDev(t, func(t *testing.T, d *rawDev) {
		own, inBody := uniqueKey("own-key"), uniqueKey("body-key")
		// A chunked body that decodes to createRunBody: its raw bytes carry
		// "POST /runs HTTP/1.1" in a chunk extension and the body's key in
		// a trailer.
		chunked := "POST /runs HTTP/1.1\r\nHost: dev\r\nAuthorization: Bearer " + d.apiKey + "\r\nContent-Type: application/json\r\n" +
			"Idempotency-Key: " + own + "\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("%x;POST /runs HTTP/1.1\r\n%s\r\n", len(createRunBody), createRunBody) +
			"0\r\nIdempotency-Key: " + inBody + "\r\n\r\n"
		first := d.exchange(t, chunked, 1)[0]
		if first.status != http.StatusCreated || first.str("runId") == "" {
			t.Fatalf("chunked createRun: %d %s, want 201", first.status, first.raw)
		}
		if again := d.exchange(t, chunked, 1)[0]; again.status >= 300 || again.str("runId") != first.str("runId") {
			t.Fatalf("the same request again: %d runId %q, want the replay of %q", again.status, again.str("runId"), first.str("runId"))
		}
		other := d.exchange(t, d.postRuns(inBody, createRunBody), 1)[0]
		if other.status != http.StatusCreated || other.str("runId") == "" || other.str("runId") == first.str("runId") {
			t.Fatalf("the key written in the body, used for real: %d runId %q, want 201 with a new run (not %q)", other.status, other.str("runId"), first.str("runId"))
		}
		if n := d.runCount(t); n != 2 {
			t.Fatalf("runs table holds %d runs, want 2 (one per key)", n)
		}

		// A Content-Length body holding a request line and a header block
		// whose key no policy accepts: whatever the answer, it is not about
		// that key.
		fake := "POST /runs HTTP/1.1\r\nHost: dev\r\nIdempotency-Key:  not a valid key!\r\n\r\n"
		a := d.exchange(t, d.postRuns(uniqueKey("own-key-two"), fake), 1)[0]
		if a.str("error") == "idempotency_key_invalid" || a.status == http.StatusCreated {
			t.Fatalf("body with an invalid key in a header block: %d %s, want an answer about the body, not about the key in it", a.status, a.raw)
		}
	})
}

// TestDevFoldedIdempotencyKeyRefused: an Idempotency-Key folded onto a
// second line (obsolete line folding) is 400 idempotency_key_invalid in the
// policy's envelope, never read as its first line's value; nothing runs.
func TestDevFoldedIdempotencyKeyRefused(t *testing.T) {
	forEachRawDev(t, func(t *testing.T, d *rawDev) {
		k := uniqueKey("folded-key")
		wire := "POST /runs HTTP/1.1\r\nHost: dev\r\nAuthorization: Bearer " + d.apiKey + "\r\nContent-Type: application/json\r\n" +
			"Idempotency-Key: " + k + "\r\n zzz\r\nContent-Length: " + fmt.Sprint(len(createRunBody)) + "\r\n\r\n" + createRunBody
		d.wantEnvelope(t, "folded Idempotency-Key", d.exchange(t, wire, 1)[0], http.StatusBadRequest, "idempotency_key_invalid")
		if n := d.runCount(t); n != 0 {
			t.Fatalf("runs table holds %d runs after a refused request, want 0", n)
		}
		if a := d.exchange(t, d.postRuns(k, createRunBody), 1)[0]; a.status != http.StatusCreated {
			t.Fatalf("the first line's key, sent unfolded: %d %s, want 201 (a fresh run)", a.status, a.raw)
		}
	})
}

// TestDevFoldedAuthorizationRefused: an Authorization header folded onto a
// second line is 400 validation_error in the policy's envelope, even when
// its lines joined would be a valid credential; nothing runs.
func TestDevFoldedAuthorizationRefused(t *testing.T) {
	forEachRawDev(t, func(t *testing.T, d *rawDev) {
		wire := "POST /runs HTTP/1.1\r\nHost: dev\r\nAuthorization: Bearer\r\n " + d.apiKey + "\r\nContent-Type: application/json\r\n" +
			"Idempotency-Key: " + uniqueKey("folded-auth") + "\r\nContent-Length: " + fmt.Sprint(len(createRunBody)) + "\r\n\r\n" + createRunBody
		d.wantEnvelope(t, "folded Authorization", d.exchange(t, wire, 1)[0], http.StatusBadRequest, "validation_error")
		if n := d.runCount(t); n != 0 {
			t.Fatalf("runs table holds %d runs after a refused request, want 0", n)
		}
	})
}

// TestDevLowercaseMethodNotACredentialError: `post /runs` with a valid
// credential is 405 idemkit.method_not_allowed with Allow, in the
// policy's envelope, never a credential error.
func TestDevLowercaseMethodNotACredentialError(t *testing.T) {
	forEachRawDev(t, func(t *testing.T, d *rawDev) {
		wire := "post" + strings.TrimPrefix(d.postRuns(uniqueKey("lowercase"), createRunBody), "POST")
		a := d.exchange(t, wire, 1)[0]
		d.wantEnvelope(t, "post /runs", a, http.StatusMethodNotAllowed, "idemkit.method_not_allowed")
		if !strings.Contains(a.header.Get("Allow"), "POST") {
			t.Fatalf("post /runs: Allow %q, want the route's methods", a.header.Get("Allow"))
		}
		if n := d.runCount(t); n != 0 {
			t.Fatalf("runs table holds %d runs after a refused request, want 0", n)
		}
	})
}
