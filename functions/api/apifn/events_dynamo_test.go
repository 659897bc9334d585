package apifn

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// TestEventsDynamo serves the events stream from RunsTable on both
// emulators: one GetItem per request (the round-trip contract), the same
// log as the memory store (timestamps at the table's millisecond
// precision), a throttled read retried, and a failed read answered 500
// internal_error without any of the run's data.
func TestEventsDynamo(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		cnt := dynamotest.NewCounter()
		faults := dynamotest.NewFaults()
		runs := &hostruns.DynamoRuns{Client: e.Client(dynamotest.FastRetries, cnt.Middleware(), faults.Middleware()),
			Table: e.CreateTable(t, "RunsTable")}
		f := hostOf(t, runs, idem.Config{}, nil)
		created := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
		r := hostruns.NewRun("acme", "conformance-noop", json.RawMessage(`{"secret":"s3cr3t"}`), created)
		if err := runs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		path := "/runs/" + hostruns.ProjectID(r.ID) + "/events"

		cnt.Reset()
		s := f.stream(t, eventsReq(path, "acme", "", ""))
		if n, ops := cnt.Total(), cnt.Ops(); n != 1 || ops["GetItem"] != 1 {
			t.Fatalf("events took %d round trips (%v), want one GetItem", n, ops)
		}
		if len(s.Frames) != 1 || s.Retry == "" {
			t.Fatalf("pending run: %+v", s)
		}
		if d := eventDoc(t, s.Frames[0].Data); d["timestamp"] != "2026-03-01T12:00:00.123Z" || d["runId"] != r.ID {
			t.Fatalf("run.started %v", d)
		}
		started := s.Frames[0].Data

		if _, err := runs.Transition(ctx, r.ID, []hostruns.Status{hostruns.StatusPending}, hostruns.StatusRunning, "", created.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := runs.Transition(ctx, r.ID, []hostruns.Status{hostruns.StatusRunning}, hostruns.StatusFailed, "node deliver: 400", created.Add(3*time.Second)); err != nil {
			t.Fatal(err)
		}
		cnt.Reset()
		s = f.stream(t, eventsReq(path, "acme", "streamMode=updates,debug", "0"))
		if cnt.Total() != 1 || len(s.Frames) != 1 || s.Frames[0].ID != "1" || s.Frames[0].Event != "updates" || s.Retry != "" {
			t.Fatalf("failed run after 0 (%d round trips): %+v", cnt.Total(), s)
		}
		d := eventDoc(t, s.Frames[0].Data)
		if d["type"] != EventRunFailed || d["timestamp"] != "2026-03-01T12:00:03.123Z" ||
			d["payload"].(map[string]any)["error"].(map[string]any)["message"] != "node deliver: 400" {
			t.Fatalf("run.failed %v", d)
		}
		if full := f.stream(t, eventsReq(path, "acme", "", "")); len(full.Frames) != 2 || full.Frames[0].Data != started {
			t.Fatalf("event 0 changed: %+v", full)
		}

		// A throttled read is retried by the SDK and still answers.
		cnt.Reset()
		faults.FailNext("GetItem", 1, dynamotest.Throttle())
		if s := f.stream(t, eventsReq(path, "acme", "", "")); len(s.Frames) != 2 || faults.Pending() != 0 {
			t.Fatalf("after a throttle: %+v", s)
		}
		// A read that fails past the SDK's retries (DynamoDB's 500s): the
		// store is out of reach, 503 idemkit.store_unavailable with
		// Retry-After (as Layer 1 answers), no run data.
		faults.FailNext("GetItem", 5, dynamotest.InternalServerError())
		resp, m := f.do(t, eventsReq(path, "acme", "", ""))
		faults.Clear()
		if resp.StatusCode != 503 || m["error"] != idem.CodeStoreUnavailable || resp.Headers[idem.HeaderRetryAfter] == "" || strings.Contains(resp.Body, "data:") ||
			strings.Contains(resp.Body, r.ID[len("acme/"):]) || resp.Headers["Content-Type"] != "application/json" {
			t.Fatalf("failed read: %d %v %s", resp.StatusCode, resp.Headers, resp.Body)
		}
		// Validation needs no round trip at all.
		cnt.Reset()
		if resp, m := f.do(t, eventsReq(path, "acme", "streamMode=all", "")); resp.StatusCode != 400 || m["error"] != CodeUnsupportedStreamMode || cnt.Total() != 0 {
			t.Fatalf("bad streamMode: %d %s after %d round trips", resp.StatusCode, resp.Body, cnt.Total())
		}
		// Another tenant: 403 before any read.
		if resp, _ := f.do(t, eventsReq(path, "globex", "", "")); resp.StatusCode != 403 || cnt.Total() != 0 {
			t.Fatalf("other tenant: %d after %d round trips", resp.StatusCode, cnt.Total())
		}
	})
}
