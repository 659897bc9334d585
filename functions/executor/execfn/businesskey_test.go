package execfn

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// businessFixture executes webhook runs carrying inputs.businessKey.
type businessFixture struct {
	runs *hostruns.MemRuns
	l    *ledger.Ledger
	x    *Executor
	rc   *receiver
}

func newBusinessFixture(t *testing.T, witnessDuplicates bool) *businessFixture {
	t.Helper()
	l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Lease: 5 * time.Second, WitnessDuplicates: witnessDuplicates})
	if err != nil {
		t.Fatal(err)
	}
	b := &businessFixture{runs: hostruns.NewMemRuns(), l: l, rc: newReceiver(t)}
	b.x = &Executor{Runs: b.runs, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Webhook: &webhook.Webhook{
		Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}}
	return b
}

func (b *businessFixture) newRun(t *testing.T, tenant, businessKey string, payload any) hostruns.Run {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"url": b.rc.srv.URL + "/hook", "payload": payload, "businessKey": businessKey})
	r := hostruns.NewRun(tenant, webhook.WorkflowWebhook, in, time.Now())
	if err := b.runs.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (b *businessFixture) execute(t *testing.T, runs ...hostruns.Run) {
	t.Helper()
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if retry := b.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e"+string(rune('a'+i)), r)}); retry != nil {
				t.Errorf("run %s: retry %v", r.ID, retry)
			}
		}()
	}
	wg.Wait()
}

func (b *businessFixture) run(t *testing.T, id string) hostruns.Run {
	t.Helper()
	r, err := b.runs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBusinessKeyDeliversOnce: runs of one tenant carrying the same
// inputs.businessKey (e.g. created under different Idempotency-Keys),
// executed concurrently, deliver once: one provider request, every run
// completed, the effect keyed "business-identity". Without
// ledger.Config.WitnessDuplicates only the run that made the attempt lists
// it; with it every run does, with the same row.
func TestBusinessKeyDeliversOnce(t *testing.T) {
	for _, wd := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "witness duplicates"}[wd], func(t *testing.T) {
			b := newBusinessFixture(t, wd)
			var runs []hostruns.Run
			for range 6 {
				runs = append(runs, b.newRun(t, "acme", "order-7", map[string]any{"order": 7}))
			}
			b.execute(t, runs...)
			keys := b.rc.seen()
			want, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: webhook.WebhookOperation, Key: "order-7"})
			if len(keys) != 1 || keys[0] != want.ProviderKey {
				t.Fatalf("provider saw %q, want one request keyed %s", keys, want.ProviderKey)
			}
			listed := 0
			for _, r := range runs {
				if got := b.run(t, r.ID); got.Status != hostruns.StatusCompleted {
					t.Fatalf("run %s: %s (%s)", r.ID, got.Status, got.Error)
				}
				p, err := b.l.Witness(context.Background(), r.ID)
				if err != nil {
					t.Fatal(err)
				}
				switch len(p.Effects) {
				case 0:
					if wd {
						t.Fatalf("run %s: witness lacks the effect under WitnessDuplicates", r.ID)
					}
				case 1:
					row := p.Effects[0]
					if row.EffectID != want.EffectID || row.Keying != identity.KeyingBusinessIdentity || row.State != ledger.AttemptCompleted ||
						row.ProviderKey != want.ProviderKey || row.Attempt != 1 {
						t.Fatalf("run %s: witness row %+v", r.ID, row)
					}
					listed++
				default:
					t.Fatalf("run %s: witness %+v", r.ID, p.Effects)
				}
			}
			if (wd && listed != len(runs)) || (!wd && listed != 1) {
				t.Fatalf("%d of %d witnesses list the effect", listed, len(runs))
			}
		})
	}
}

// TestBusinessKeyScope: the business identity is tenant-bound (two tenants,
// one key: two deliveries under two provider keys); a run reusing a key for
// a different delivery (another payload) fails with a mismatch and sends
// nothing; a run without businessKey keeps the activity recipe.
func TestBusinessKeyScope(t *testing.T) {
	b := newBusinessFixture(t, false)
	a1 := b.newRun(t, "acme", "evt-1", map[string]any{"n": 1})
	g1 := b.newRun(t, "globex", "evt-1", map[string]any{"n": 1})
	b.execute(t, a1, g1)
	if keys := b.rc.seen(); len(keys) != 2 || keys[0] == keys[1] {
		t.Fatalf("two tenants: provider saw %q", keys)
	}
	// Same payload, members reordered and reformatted: the same request.
	in := json.RawMessage(`{"businessKey":"evt-1","payload":{ "n" : 1.0 },"url":"` + b.rc.srv.URL + `/hook"}`)
	same := hostruns.NewRun("acme", webhook.WorkflowWebhook, in, time.Now())
	if err := b.runs.Create(context.Background(), same); err != nil {
		t.Fatal(err)
	}
	diff := b.newRun(t, "acme", "evt-1", map[string]any{"n": 2})
	b.execute(t, same)
	b.execute(t, diff)
	if n := len(b.rc.seen()); n != 2 {
		t.Fatalf("%d provider requests after a replay and a mismatch", n)
	}
	if r := b.run(t, same.ID); r.Status != hostruns.StatusCompleted {
		t.Fatalf("same request: %+v", r)
	}
	if r := b.run(t, diff.ID); r.Status != hostruns.StatusFailed {
		t.Fatalf("different payload under the key: %+v", r)
	}
	if _, err := b.l.Do(context.Background(), ledger.Effect{Identity: mustIdentity(t, diff), RunID: diff.ID, NodeID: webhook.NodeDeliver},
		func(context.Context, ledger.Call) ([]byte, error) { return nil, nil }); !errors.Is(err, ledger.ErrMismatch) {
		t.Fatalf("undigested Do on a digested record: %v", err)
	}
	plain := (&fixture{runs: b.runs, l: b.l}).webhookRun(t, b.rc.srv.URL+"/hook")
	b.execute(t, plain)
	p, _ := b.l.Witness(context.Background(), plain.ID)
	if len(p.Effects) != 1 || p.Effects[0].Keying != identity.KeyingActivityRecipe {
		t.Fatalf("plain run witness %+v", p.Effects)
	}
}

func mustIdentity(t *testing.T, r hostruns.Run) identity.Identity {
	t.Helper()
	id, err := webhook.WebhookIdentity(r)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
