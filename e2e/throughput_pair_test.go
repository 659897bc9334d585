package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The call pair BenchmarkDevThroughput replays is the claim and completion
// dev sent, with the keys, the transaction token and the tables replaced,
// and the executor's transitions of the same run after it.
func TestDevPairReplaysTheSampledCalls(t *testing.T) {
	c := &callCounter{header: http.Header{"Authorization": {"AWS4-HMAC-SHA256 Credential=x"}}}
	c.puts = [][]byte{
		[]byte(`{"Item":{"pk":{"S":"other"}},"TableName":"idemkit-IdempotencyTable"}`),
		[]byte(`{"ConditionExpression":"attribute_not_exists(#k)","Item":{"pk":{"S":"t#key1"}},"TableName":"idemkit-IdempotencyTable"}`),
		[]byte(`{"Item":{"pk":{"S":"arn:aws:dynamodb:x:table/idemkit-RunsTable/stream/1"}},"TableName":"idemkit-DevStreamCheckpoints"}`),
	}
	c.twi = []byte(`{"ClientRequestToken":"tok-1","TransactItems":[{"Put":{"Item":{"pk":{"S":"t#key1"}},"TableName":"idemkit-IdempotencyTable"}},{"Put":{"Item":{"pk":{"S":"run_1"}},"TableName":"idemkit-RunsTable"}}]}`)
	c.updates = [][]byte{
		[]byte(`{"Key":{"pk":{"S":"run_1"}},"TableName":"idemkit-RunsTable","UpdateExpression":"SET #s = :running"}`),
		[]byte(`{"Key":{"pk":{"S":"run_2"}},"TableName":"idemkit-RunsTable"}`),
		[]byte(`{"Key":{"pk":{"S":"run_1"}},"TableName":"idemkit-RunsTable","UpdateExpression":"SET #s = :completed"}`),
	}
	p, err := c.pair()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.exec) != 2 || !bytes.Contains(p.claim, []byte("attribute_not_exists")) {
		t.Fatalf("sampled claim %s and %d transitions", p.claim, len(p.exec))
	}
	if err := p.retarget(map[string]string{"IdempotencyTable": "pair-IdempotencyTable", "RunsTable": "pair-RunsTable"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Header.Get("X-Amz-Target")+" "+string(b))
		mu.Unlock()
		io.WriteString(w, "{}")
	}))
	defer srv.Close()
	if err := p.send(context.Background(), srv.Client(), srv.URL, "f1", true, &opTimes{}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("sent %d calls, want claim, completion and two transitions", len(got))
	}
	for i, op := range []string{"PutItem", "TransactWriteItems", "UpdateItem", "UpdateItem"} {
		if !strings.HasPrefix(got[i], "DynamoDB_20120810."+op+" ") {
			t.Errorf("call %d: %.60s, want %s", i, got[i], op)
		}
		for _, old := range []string{`"t#key1"`, `"run_1"`, `"tok-1"`, `"idemkit-`} {
			if strings.Contains(got[i], old) {
				t.Errorf("call %d still holds %s: %s", i, old, got[i])
			}
		}
		if !strings.Contains(got[i], `"pair-`) {
			t.Errorf("call %d names no pair table: %s", i, got[i])
		}
	}
	if !strings.Contains(got[1], `"ClientRequestToken":"f1"`) {
		t.Errorf("the completion's token is not fresh: %s", got[1])
	}
}

func TestTableOfACall(t *testing.T) {
	for body, want := range map[string]string{
		`{"Item":{"pk":{"S":"arn:aws:dynamodb:x:table/idemkit-RunsTable/stream/1"}},"TableName":"idemkit-DevStreamCheckpoints"}`: "DevStreamCheckpoints",
		`{"StreamArn":"arn:aws:dynamodb:ddblocal:000000000000:table/idemkit-EffectsTable/stream/2026"}`:                          "EffectsTable",
		`{"ShardIterator":"opaque"}`: "?",
	} {
		if got := tableOf([]byte(body)); got != want {
			t.Errorf("tableOf(%s) = %q, want %q", body, got, want)
		}
	}
}
