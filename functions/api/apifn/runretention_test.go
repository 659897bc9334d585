package apifn

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestGetRunAfterItsRetention: a run cancelled through the API under a run
// retention is served until its expiry and answered 404 not_found (the
// error registry's code for a missing run, in the error envelope) from
// then on, as after RunsTable's TTL deleted it, and so are its events and
// its effects witness; the Idempotency-Key that
// created it still replays its 201 byte for byte (Layer 1 keeps its own
// records), and the replay creates no run.
func TestGetRunAfterItsRetention(t *testing.T) {
	const retention = 14 * 24 * time.Hour
	clk := clock.NewManual(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
	mem := runs.NewMemRuns()
	mem.Retention, mem.Now = retention, clk.Now
	f := hostOf(t, mem, idem.Config{}, func(_ *fixture, c *Config) { c.Test.Clock = clk })
	body := `{"workflowId":"conformance-noop","inputs":{}}`
	created, m := f.do(t, ev("POST", "/runs", "acme", key1, body))
	if created.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", created.StatusCode, created.Body)
	}
	id, _ := m["runId"].(string)
	path := "/runs/" + runs.ProjectID(id)
	clk.Advance(time.Minute)
	if r, c := f.do(t, ev("POST", path+"/cancel", "acme", "k-cancel-0123456789abcdefgh", `{}`)); r.StatusCode != http.StatusOK || c["status"] != "cancelled" {
		t.Fatalf("cancel: %d %s", r.StatusCode, r.Body)
	}
	ended := clk.Now()
	if r, err := mem.Get(t.Context(), id); err != nil || !r.ExpiresAt.Equal(ended.Add(retention)) {
		t.Fatalf("the cancelled run: expiresAt %v %v, want %v", r.ExpiresAt, err, ended.Add(retention))
	}

	clk.Set(ended.Add(retention - time.Second))
	if r, _ := f.do(t, ev("GET", path, "acme", "", "")); r.StatusCode != http.StatusOK {
		t.Fatalf("a second before its expiry: %d %s, want 200", r.StatusCode, r.Body)
	}
	clk.Set(ended.Add(retention))
	r, g := f.do(t, ev("GET", path, "acme", "", ""))
	if r.StatusCode != http.StatusNotFound || g["error"] != "not_found" || g["message"] == nil || len(g) > 3 {
		t.Fatalf("GET after its retention: %d %s, want 404 not_found in the envelope", r.StatusCode, r.Body)
	}
	for _, sub := range []string{"/events", "/effects"} {
		if r, g := f.do(t, ev("GET", path+sub, "acme", "", "")); r.StatusCode != http.StatusNotFound || g["error"] != "not_found" {
			t.Fatalf("GET %s after its retention: %d %s, want 404 not_found", sub, r.StatusCode, r.Body)
		}
	}
	for i, sub := range []string{"/retry", ":fork"} {
		r, g := f.do(t, ev("POST", path+sub, "acme", fmt.Sprintf("k-after-expiry-%d-0123456789abc", i), `{"mode":"branch","fromSeq":1}`))
		if r.StatusCode != http.StatusNotFound || g["error"] != "not_found" {
			t.Fatalf("POST %s after its retention: %d %s, want 404 not_found", sub, r.StatusCode, r.Body)
		}
	}
	replay, _ := f.do(t, ev("POST", "/runs", "acme", key1, body))
	if replay.StatusCode != http.StatusCreated || replay.Body != created.Body {
		t.Fatalf("the key's replay after the run expired: %d %s, want the 201 byte for byte:\n%s", replay.StatusCode, replay.Body, created.Body)
	}
	if n := mem.Len(); n != 0 {
		t.Fatalf("%d runs after the replay, want none (the expired run dropped, none created)", n)
	}
}

// TestRunPastItsRetentionBeforeItsDeletion (RED_TEAM 426): on RunsTable a
// run past its retention is answered as TestGetRunAfterItsRetention
// answers it on the memory store, from its expiry on and before DynamoDB's
// TTL deletes its item (some time later, up to days): GET, its events,
// its effects witness, a retry, a fork, a cancel, a pause and a resume are
// 404 not_found, on the three engines; a second before its expiry it is
// served. Nothing deletes the item here.
func TestRunPastItsRetentionBeforeItsDeletion(t *testing.T) {
	const retention = 14 * 24 * time.Hour
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		clk := clock.NewManual(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable"),
			Retention: retention, Now: clk.Now}
		f := hostOf(t, rs, idem.Config{}, func(_ *fixture, c *Config) { c.Test.Clock = clk })
		created, m := f.do(t, ev("POST", "/runs", "acme", "", `{"workflowId":"conformance-noop"}`))
		if created.StatusCode != http.StatusCreated {
			t.Fatalf("create: %d %s", created.StatusCode, created.Body)
		}
		id, _ := m["runId"].(string)
		path := "/runs/" + runs.ProjectID(id)
		clk.Advance(time.Minute)
		// A failed run (a retry's source) ends by the executor's write.
		if _, err := rs.Transition(t.Context(), id, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", clk.Now()); err != nil {
			t.Fatal(err)
		}
		ended, err := rs.Get(t.Context(), id)
		if err != nil || ended.ExpiresAt.IsZero() {
			t.Fatalf("the failed run: expiresAt %v %v, want one", ended.ExpiresAt, err)
		}

		clk.Set(ended.ExpiresAt.Add(-time.Second))
		if r, _ := f.do(t, ev("GET", path, "acme", "", "")); r.StatusCode != http.StatusOK {
			t.Fatalf("a second before its expiry: %d %s, want 200", r.StatusCode, r.Body)
		}
		clk.Set(ended.ExpiresAt)
		for _, c := range []struct{ method, sub, body string }{
			{"GET", "", ""}, {"HEAD", "", ""}, {"GET", "/events", ""}, {"GET", "/events/poll", ""}, {"GET", "/effects", ""},
			{"POST", "/retry", ""}, {"POST", ":fork", `{"mode":"replay"}`}, {"POST", "/cancel", `{}`},
			{"POST", ":pause", `{}`}, {"POST", ":resume", `{}`},
		} {
			r, g := f.do(t, ev(c.method, path+c.sub, "acme", "", c.body))
			if r.StatusCode != http.StatusNotFound || (c.method != "HEAD" && g["error"] != "not_found") {
				t.Errorf("%s %s at its expiry, not yet deleted: %d %s, want 404 not_found", c.method, c.sub, r.StatusCode, r.Body)
			}
		}
		if n, err := rs.Get(t.Context(), id); !errors.Is(err, runs.ErrRunNotFound) {
			t.Fatalf("the store reads %s %v, want ErrRunNotFound", n.Status, err)
		}
	})
}
