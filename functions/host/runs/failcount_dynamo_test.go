package runs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/runs/runstest"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestLargestRunTakesEveryFailureTheStreamRetries: the executor counts
// each failed try on the run (NoteFailure: failures, lastError and one
// version of its log, the message at most 512 bytes) and the last try,
// 1 + STREAM_MAX_RETRIES, ends it failed. At the setting's largest value
// the largest run the host accepts, of the longest tenant, failing every
// try with the longest message, takes every count and its end: an item
// past DynamoDB's 400 KB would refuse both, and the run would stay live,
// re-executed by the stale-run pass, never failed.
func TestLargestRunTakesEveryFailureTheStreamRetries(t *testing.T) {
	most := -1
	for _, s := range settings.Settings {
		if s.Name == settings.EnvStreamMaxRetries {
			most = s.Max
		}
	}
	if most < 0 {
		t.Fatal("no STREAM_MAX_RETRIES setting")
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable")}
		now := time.Now()
		r := runs.NewRun(strings.Repeat("t", 128), "conformance-noop", nil, now)
		r.Options.Metadata = json.RawMessage(`{"pad":"` + strings.Repeat("x", runstest.LargestBody-len(`{"pad":""}`)) + `"}`)
		if err := rs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", now); err != nil {
			t.Fatal(err)
		}
		msg := strings.Repeat("e", 512)
		for i := 1; i <= most+1; i++ {
			if n, err := rs.NoteFailure(ctx, r.ID, msg, now); err != nil || n != i {
				t.Fatalf("failure %d of %d (STREAM_MAX_RETRIES %d): %d, %v", i, most+1, most, n, err)
			}
		}
		got, err := rs.Transition(ctx, r.ID, []runs.Status{runs.StatusRunning}, runs.StatusFailed, msg, now)
		if err != nil || got.Status != runs.StatusFailed || got.Failures != most+1 {
			t.Fatalf("the last try's end: %s %d, %v", got.Status, got.Failures, err)
		}
	})
}
