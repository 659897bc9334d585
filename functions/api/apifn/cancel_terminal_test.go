package apifn

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/header"
)

// TestConcurrentCancelsOneWins: cancels of one pending run sent at once
// under different Idempotency-Keys (the default policy; runs and Layer-1
// records in memory and on every emulator): exactly one cancels it (200
// cancelled), every other is 409 run_terminal — the run is cancelled, so it
// already ended (runs.md §Cancel: a 200 echoing the terminal state is
// non-conformant). Each key then replays its own first answer, and a cancel
// under a fresh key is still refused.
func TestConcurrentCancelsOneWins(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, st := backendStores(t, e)
		f := hostOf(t, rs, idem.Config{Store: st}, nil)
		ctx := context.Background()
		r := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{}`), time.Now())
		if err := rs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		path := "/runs/" + runs.ProjectID(r.ID) + "/cancel"
		const n = 6
		keys := make([]string, n)
		status := make([]int, n)
		bodies := make([]string, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range keys {
			keys[i] = fmt.Sprintf("k-cancel-%d-0123456789abcdefgh", i)
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				resp, err := f.h.Handle(ctx, ev("POST", path, "acme", keys[i], `{}`))
				if err != nil {
					t.Errorf("cancel %d: %v", i, err)
					return
				}
				status[i], bodies[i] = resp.StatusCode, resp.Body
			}(i)
		}
		close(start)
		wg.Wait()
		won := 0
		for i := range keys {
			var m map[string]any
			_ = json.Unmarshal([]byte(bodies[i]), &m)
			switch {
			case status[i] == 200 && m["status"] == "cancelled":
				won++
			case status[i] == 409 && m["error"] == "run_terminal":
			default:
				t.Fatalf("cancel %d: %d %s, want 200 cancelled or 409 run_terminal", i, status[i], bodies[i])
			}
		}
		if won != 1 {
			t.Fatalf("%d cancels answered 200, want exactly 1: %v %q", won, status, bodies)
		}
		if got, err := rs.Get(ctx, r.ID); err != nil || got.Status != runs.StatusCancelled {
			t.Fatalf("the run: %+v %v", got, err)
		}
		for i := range keys {
			resp, _ := f.do(t, ev("POST", path, "acme", keys[i], `{}`))
			if resp.StatusCode != status[i] || resp.Body != bodies[i] || header.First(resp.Headers, "OpenWOP-Idempotent-Replay") != "true" {
				t.Fatalf("key %d replayed %d %s (replay %q), want its first answer %d %s", i, resp.StatusCode, resp.Body,
					header.First(resp.Headers, "OpenWOP-Idempotent-Replay"), status[i], bodies[i])
			}
		}
		if resp, m := f.do(t, ev("POST", path, "acme", "k-cancel-late-0123456789abcdef", `{}`)); resp.StatusCode != 409 || m["error"] != "run_terminal" {
			t.Fatalf("a later cancel: %d %s", resp.StatusCode, resp.Body)
		}
	})
}
