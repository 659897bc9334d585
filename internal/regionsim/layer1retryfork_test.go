package regionsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/auditor/auditfn"
	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/regionsim"
	"github.com/idemkit/idemkit/ledger/fence"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestLayer1RetryAndForkKeysConvergeOnLowestRunID: the lowest-run-id rule
// of MULTI_REGION.md covers every key whose stored 201 names a run, not
// only createRun's: a retry's (POST /runs/{runId}/retry) and a fork's
// (POST /runs/{runId}:fork) 201 names the new run too. Through the
// deployable api handler (kit, apifn) under reconciled-records, each
// region on its replica of one IdempotencyTable and its own RunsTable:
// the source run exists in both regions under one id (as a createRun key
// that ran in both regions through a takeover leaves it, runs.ClaimRunID),
// failed for the retry. One retry (or fork) key sent to both regions
// during a partition creates a new run in each; on healing, with each
// region's auditor reading its stream, both regions hold the record
// naming the lower of the two runs, whichever was written last, and every
// conflict event names it the winner; the key then replays that 201 in
// both regions. With redelivery every change is audited twice as it
// happens and all of them again, in reverse order, after healing.
func TestLayer1RetryAndForkKeysConvergeOnLowestRunID(t *testing.T) {
	for _, route := range []string{"retry", "fork"} {
		for _, first := range []string{eu, us} {
			for _, redeliver := range []bool{false, true} {
				name := route + "/" + first + "-first"
				if redeliver {
					name += "/redelivered"
				}
				t.Run(name, func(t *testing.T) {
					w := newRetryFork(t, route, redeliver, eu, us)
					created := w.sendBoth(first)
					low, high := created[eu].runID, created[us].runID
					if high < low {
						low, high = high, low
					}
					if low == "" || low == high {
						t.Fatalf("runs created %v; want a new run in each region", created)
					}
					t.Logf("the lower run %s was written %s", low, map[bool]string{true: "first", false: "second"}[created[first].runID == low])
					w.heal()
					for _, r := range []string{eu, us} {
						if got := w.recordRun(r); got != low {
							t.Errorf("%s's replica holds the record naming %q; want the lower run %s", r, got, low)
						}
						again := w.send(r, "req-again-"+r)
						if again.StatusCode != http.StatusCreated || !replayed(again.Headers) || !strings.Contains(again.Body, `"runId":"`+low+`"`) {
							t.Errorf("%s: the key again: %d %s; want a replay of the lower run's 201", r, again.StatusCode, again.Body)
						}
					}
					evs := w.events()
					if len(evs) == 0 {
						t.Fatal("no Layer-1 conflict event for a key that created a run in each region")
					}
					for _, ev := range evs {
						w, _ := ev["winner"].(map[string]any)
						l, _ := ev["loser"].(map[string]any)
						if w["run"] != low || l["run"] != high {
							t.Fatalf("conflict event %v; want winner %s, loser %s", ev, low, high)
						}
					}
				})
			}
		}
	}
}

// TestLayer1RetryKeyAnswered404InOneRegionKeepsTheRun: under
// reconciled-records runs are regional, so a retry key sent to both
// regions during a partition, its failed run held by one region only,
// creates a run there and is answered 404 in the other (a kept answer
// naming no run). Whichever is written last, both regions end on the
// record naming the run: the 404 region's pending claim replicates before
// its completion and is held, and its completion, found at the hold's
// write, names no run and is written over (as a released claim is). One
// run, so no conflict event.
func TestLayer1RetryKeyAnswered404InOneRegionKeepsTheRun(t *testing.T) {
	for _, first := range []string{eu, us} {
		t.Run(first+"-first", func(t *testing.T) {
			w := newRetryFork(t, "retry", false, eu) // the failed run is in eu only
			got := w.sendBoth(first)
			if got[eu].status != http.StatusCreated || got[eu].runID == "" || got[us].status != http.StatusNotFound {
				t.Fatalf("answers %v; want 201 in eu, 404 in us", got)
			}
			w.heal()
			for _, r := range []string{eu, us} {
				if run := w.recordRun(r); run != got[eu].runID {
					t.Errorf("%s's replica holds the record naming %q; want eu's run %s", r, run, got[eu].runID)
				}
				if again := w.send(r, "req-again-"+r); again.StatusCode != http.StatusCreated || !replayed(again.Headers) {
					t.Errorf("%s: the key again: %d %s; want a replay of eu's 201", r, again.StatusCode, again.Body)
				}
			}
			if evs := w.events(); len(evs) != 0 {
				t.Fatalf("conflict events %v; a 201 and a 404 are not two runs", evs)
			}
		})
	}
}

// retryFork is Layer 1 of the deployable api under reconciled-records in
// eu and us, a conflict auditor per region reading the replicator's
// changes, and one source run for a retry or fork key.
type retryFork struct {
	t         *testing.T
	p         *pair
	clock     *ledgertest.Clock
	rep       *regionsim.Replicator
	api       map[string]*apifn.Handler
	store     map[string]runs.RunStore
	auditors  map[string]*auditfn.Auditor
	redeliver bool
	seen      []regionsim.Change
	auditErr  error
	path      string
	body      string

	mu   sync.Mutex // guards logs
	logs bytes.Buffer
}

const retryForkKey = "7c3e2a1f-4b5d-4e6f-9a8b-1c2d3e4f5a6b"

// newRetryFork sets it up, the source run in the regions srcIn (failed for
// a retry), under one id.
func newRetryFork(t *testing.T, route string, redeliver bool, srcIn ...string) *retryFork {
	return newAPIRegions(t, route, redeliver, nil, srcIn...)
}

// newAPIRegions is newRetryFork for route "retry", "fork" or "create"
// (createRun, no source run), each region's DynamoDB client built with
// opts[region] too.
func newAPIRegions(t *testing.T, route string, redeliver bool, opts map[string]func(*dynamodb.Options), srcIn ...string) *retryFork {
	w := &retryFork{t: t, p: newPair(t, "IdempotencyTable"), clock: ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)),
		api: map[string]*apifn.Handler{}, store: map[string]runs.RunStore{}, auditors: map[string]*auditfn.Auditor{}, redeliver: redeliver}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	for _, r := range []string{eu, us} {
		runsTable, effectsTable := w.p.emu[r].CreateTable(t, "RunsTable"), w.p.emu[r].CreateTable(t, "EffectsTable")
		env, err := settings.LoadEnv(func(k string) string {
			return map[string]string{settings.EnvCrossRegion: settings.CrossRegionReconciled,
				"IDEMPOTENCY_TABLE": w.p.tables[r], settings.EnvRunsTable: runsTable, settings.EnvEffectsTable: effectsTable}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		client := w.p.db(r)
		if opts[r] != nil {
			client = w.p.emu[r].Client(opts[r])
		}
		k, err := kit.NewKit(kit.Config{Env: env, Client: client, Parts: kit.Parts{Runs: true, Guard: true, Ledger: true}, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		if w.api[r], err = apifn.New(apifn.ConfigFromKit(k)); err != nil {
			t.Fatal(err)
		}
		w.store[r] = k.Runs
		ca, err := conflictaudit.New(conflictaudit.Config{Strategy: fence.ReconciledRecords, Region: r,
			Log: slog.New(slog.NewJSONHandler(&lockedWriter{mu: &w.mu, w: &w.logs}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		w.auditors[r] = &auditfn.Auditor{Conflicts: ca, Now: w.clock.Now, Logger: logger,
			Restore: auditfn.TableRestorer{Client: w.p.db(r), Table: w.p.tables[r]}}
	}
	rep, err := newReplicator(t, regionsim.Config{A: w.p.region(eu), B: w.p.region(us), Lag: time.Second, Now: w.clock.Now,
		OnChange: func(c regionsim.Change) {
			w.audit(c)
			if redeliver {
				w.audit(c)
				w.seen = append(w.seen, c)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	w.rep = rep
	// The source run, on the api's clock (the real one: a fork is refused
	// past its source's retention).
	src := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{}`), time.Now())
	for _, r := range srcIn {
		if err := w.store[r].Create(ctx(t), src); err != nil {
			t.Fatal(err)
		}
		if route == "retry" {
			if _, err := w.store[r].Transition(ctx(t), src.ID, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	switch route {
	case "create":
		w.path, w.body = "/runs", `{"workflowId":"conformance-noop","inputs":{}}`
	case "fork":
		w.path, w.body = "/runs/"+runs.ProjectID(src.ID)+":fork", `{"mode":"replay"}`
	default:
		w.path = "/runs/" + runs.ProjectID(src.ID) + "/retry"
	}
	return w
}

func (w *retryFork) audit(c regionsim.Change) {
	cnt := w.auditors[c.Region].Audit(ctx(w.t), []stream.StreamRecord{{EventName: c.Event, Keys: c.Keys, OldImage: c.Old, NewImage: c.New}})
	if cnt.RestoreErr != nil {
		w.auditErr = cnt.RestoreErr
	}
}

// send posts the key to region r's api as request reqID.
func (w *retryFork) send(r, reqID string) events.APIGatewayV2HTTPResponse {
	w.t.Helper()
	ev := events.APIGatewayV2HTTPRequest{RawPath: w.path, Body: w.body,
		Headers: map[string]string{"content-type": "application/json", "idempotency-key": retryForkKey}}
	ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = http.MethodPost, w.path
	ev.RequestContext.DomainName, ev.RequestContext.RequestID = "api.example.com", reqID
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}}
	resp, err := w.api[r].Handle(context.Background(), ev)
	if err != nil {
		w.t.Fatal(err)
	}
	return resp
}

type answer struct {
	status int
	runID  string
}

// sendBoth partitions the regions and sends the key to first, then to the
// other region, each write observed in its region's stream in that order.
func (w *retryFork) sendBoth(first string) map[string]answer {
	w.t.Helper()
	w.step()
	w.rep.SetPartitioned(true)
	second := us
	if first == us {
		second = eu
	}
	out := map[string]answer{}
	for _, r := range []string{first, second} {
		resp := w.send(r, "req-"+r)
		if replayed(resp.Headers) {
			w.t.Fatalf("%s during the partition: a replay %d %s", r, resp.StatusCode, resp.Body)
		}
		var b struct {
			RunID string `json:"runId"`
		}
		_ = json.Unmarshal([]byte(resp.Body), &b)
		out[r] = answer{resp.StatusCode, b.RunID}
		w.step()
	}
	return out
}

func (w *retryFork) step() {
	w.t.Helper()
	if _, err := w.rep.Step(ctx(w.t)); err != nil {
		w.t.Fatal(err)
	}
	w.clock.Advance(100 * time.Millisecond)
}

// heal ends the partition and replicates everything (with redelivery, then
// audits every change seen again in reverse order and replicates again).
func (w *retryFork) heal() {
	w.t.Helper()
	w.rep.SetPartitioned(false)
	sync := func() {
		for range 3 {
			w.clock.Advance(2 * time.Second)
			if err := w.rep.Sync(ctx(w.t)); err != nil {
				w.t.Fatal(err)
			}
		}
	}
	sync()
	if w.redeliver {
		for i := len(w.seen) - 1; i >= 0; i-- {
			w.audit(w.seen[i])
		}
		sync()
	}
	if w.auditErr != nil {
		w.t.Fatal(w.auditErr)
	}
}

// recordRun is the run the key's record names in region r's replica.
func (w *retryFork) recordRun(r string) string {
	rec, err := idemdynamo.DecodeItem(onlyRecord(w.t, w.p, r))
	if err != nil || rec.Response == nil || rec.State != idem.StateCompleted {
		w.t.Fatalf("%s: the record %s %v (%v)", r, rec.State, rec.Response, err)
	}
	var b struct {
		RunID string `json:"runId"`
	}
	_ = json.Unmarshal(rec.Response.Body, &b)
	return b.RunID
}

func (w *retryFork) events() []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	return conflictEvents(w.t, w.logs.String())
}
