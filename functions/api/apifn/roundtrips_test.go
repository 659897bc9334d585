package apifn

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
)

// tripEnv is one api handler whose runs (inbox included), Layer-1 records
// and ledger live in one emulator's tables, every call counted.
type tripEnv struct {
	f   *fixture
	rs  *runs.DynamoRuns
	ib  inbox.Store
	cnt *dynamotest.Counter
	n   int // requests made, for unique keys

	// holdKey, when set, is the Idempotency-Key whose createRun stops
	// under its claim: held is signalled, then it waits for release.
	mu      sync.Mutex
	holdKey string
	held    chan struct{}
	release chan struct{}
	done    chan struct{}
}

func newTripEnv(t *testing.T, e *dynamotest.Emulator, transactional bool, policy idem.Policy) *tripEnv {
	t.Helper()
	env := &tripEnv{cnt: dynamotest.NewCounter()}
	c := e.Client(dynamotest.FastRetries, env.cnt.Middleware())
	// Told what the engine returns on a refused write, as the kit tells
	// it on DynamoDB (RED_TEAM 521).
	env.rs = &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable"), Transactional: transactional,
		ReturnsOldOnConditionFailure: e.Caps.ReturnValuesOnConditionCheckFailure}
	st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
	if err != nil {
		t.Fatal(err)
	}
	ls, err := ledgerdynamo.New(ledgerdynamo.Config{Client: c, Table: e.CreateTable(t, "EffectsTable")})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: ls})
	if err != nil {
		t.Fatal(err)
	}
	// No wait budget: a duplicate of a request still executing is answered
	// at once (a wait's polls would come on top).
	env.f = hostOf(t, env.rs, idem.Config{Store: st, Wait: -1, BodyTenantField: "tenantId", Policy: policy, Routes: kit.Layer1Routes()}, func(f *fixture, cfg *Config) {
		cfg.Ledger = l
		cfg.Test.Hold = env.hold
	})
	env.ib = env.f.h.cfg.Inbox
	return env
}

func (env *tripEnv) hold(_ context.Context, _, key string) error {
	env.mu.Lock()
	k, held, release := env.holdKey, env.held, env.release
	env.mu.Unlock()
	if key != "" && key == k {
		held <- struct{}{}
		<-release
	}
	return nil
}

// key is a fresh Idempotency-Key.
func (env *tripEnv) key() string {
	env.n++
	return fmt.Sprintf("k-trips-%04d-0123456789abcdef", env.n)
}

// run is a run of tenant in status.
func (env *tripEnv) run(t *testing.T, tenant string, status runs.Status) runs.Run {
	t.Helper()
	return bulkRun(t, env.rs, tenant, status)
}

// do serves e as a setup step (not counted against the row).
func (env *tripEnv) do(t *testing.T, e events.APIGatewayV2HTTPRequest, want int) {
	t.Helper()
	if r, _ := env.f.do(t, e); r.StatusCode != want {
		t.Fatalf("setup %s %s: %d %s, want %d", e.RequestContext.HTTP.Method, e.RawPath, r.StatusCode, r.Body, want)
	}
}

// inFlight starts e (a keyed createRun) and returns once it holds its
// claim; the caller ends it with finish.
func (env *tripEnv) inFlight(t *testing.T, e events.APIGatewayV2HTTPRequest) {
	t.Helper()
	env.mu.Lock()
	env.holdKey, env.held, env.release, env.done = e.Headers["idempotency-key"], make(chan struct{}), make(chan struct{}), make(chan struct{})
	held, done := env.held, env.done
	env.mu.Unlock()
	go func() {
		defer close(done)
		_, _ = env.f.h.Handle(context.Background(), e)
	}()
	<-held
}

// finish releases a request inFlight started and waits for its end.
func (env *tripEnv) finish() {
	env.mu.Lock()
	release, done := env.release, env.done
	env.holdKey, env.release, env.done = "", nil, nil
	env.mu.Unlock()
	if release != nil {
		close(release)
		<-done
	}
}

// entry keeps an inbox entry of acme's (a refused offline cancel of a
// run) and returns its id.
func (env *tripEnv) entry(t *testing.T) string { return env.entryOf(t, "acme") }

// entryOf keeps an inbox entry of tenant's.
func (env *tripEnv) entryOf(t *testing.T, tenant string) string {
	t.Helper()
	r := env.run(t, tenant, runs.StatusRunning)
	id := tripEntryID(env)
	if err := env.ib.Keep(context.Background(), inbox.Entry{ID: id, Tenant: tenant, Operation: "cancelRun", RecordID: r.ID,
		DecidedVersion: 1, CurrentVersion: r.Version, CreatedAt: time.Now()}, "req-keep"); err != nil {
		t.Fatal(err)
	}
	return id
}

// tripEntryID is a fresh inbox entry id.
func tripEntryID(env *tripEnv) string {
	env.n++
	return inbox.EntryID(idem.ClaimInfo{ID: fmt.Sprintf("entry-%d", env.n), OriginalRequestID: "r"}, true)
}

// tripRow is one outcome of one route and the round trips it costs.
type tripRow struct {
	method, pattern string // the route, as Routes names it
	outcome         string
	// req prepares the state (uncounted) and returns the request counted.
	req    func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest
	status int
	// want is the round trips per operation on an engine that returns the
	// stored item when a condition fails (moto, as DynamoDB), the runs
	// written without transactions; tx, when set, with them written
	// transactionally (RUNS_TRANSACTIONAL, the default). noOld is the
	// GetItems added where a failed condition returns no item (dynalite,
	// DynamoDB Local): one per failed claim or run write that found an
	// item.
	want, tx map[string]int
	noOld    int
}

func ops(kv ...any) map[string]int {
	m := map[string]int{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(int)
	}
	return m
}

func runPath(r runs.Run, suffix string) string { return "/runs/" + runs.ProjectID(r.ID) + suffix }

// keyed is e under a fresh key.
func keyedReq(env *tripEnv, method, path, body string) events.APIGatewayV2HTTPRequest {
	return ev(method, path, "acme", env.key(), body)
}

// replayOf serves e once (setup) and returns it again, to be replayed.
func replayOf(t *testing.T, env *tripEnv, e events.APIGatewayV2HTTPRequest, status int) events.APIGatewayV2HTTPRequest {
	t.Helper()
	env.do(t, e, status)
	return e
}

// mismatchOf serves e once (setup) and returns the same key with body.
func mismatchOf(t *testing.T, env *tripEnv, e events.APIGatewayV2HTTPRequest, status int, body string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	env.do(t, e, status)
	m := e
	m.Body = body
	m.RequestContext.RequestID += "-2"
	return m
}

const tripCreate = `{"workflowId":"conformance-noop"}`

// tripRows are the run API's round trips per route and outcome, under
// the OpenWOP policy with no wait budget for a duplicate: the contract
// docs/PERFORMANCE.md's "Round trips per request" states.
func tripRows() []tripRow {
	missing := func() runs.Run { return runs.NewRun("acme", "conformance-noop", nil, time.Now()) }
	other := func() runs.Run { return runs.NewRun("globex", "conformance-noop", nil, time.Now()) }
	none := ops()
	// A read of one run: GetItem, GET and HEAD alike.
	read := func(method, suffix string, found map[string]int) []tripRow {
		pattern := "/runs/{runId}" + suffix
		return []tripRow{
			{method: method, pattern: pattern, outcome: "found", status: 200, want: found,
				req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
					return ev(method, runPath(env.run(t, "acme", runs.StatusCompleted), suffix), "acme", "", "")
				}},
			{method: method, pattern: pattern, outcome: "not found", status: 404, want: ops("GetItem", 1),
				req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
					return ev(method, runPath(missing(), suffix), "acme", "", "")
				}},
			{method: method, pattern: pattern, outcome: "another tenant", status: 403, want: none,
				req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
					return ev(method, runPath(other(), suffix), "acme", "", "")
				}},
		}
	}
	rows := []tripRow{
		{method: "POST", pattern: "/runs", outcome: "first execution, no key", status: 201, want: ops("PutItem", 1),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return ev("POST", "/runs", "acme", "", tripCreate)
			}},
		{method: "POST", pattern: "/runs", outcome: "first execution", status: 201, want: ops("PutItem", 3), tx: ops("PutItem", 1, "TransactWriteItems", 1),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", "/runs", tripCreate)
			}},
		{method: "POST", pattern: "/runs", outcome: "replay", status: 201, want: ops("PutItem", 1), noOld: 1,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return replayOf(t, env, keyedReq(env, "POST", "/runs", tripCreate), 201)
			}},
		{method: "POST", pattern: "/runs", outcome: "in flight", status: 409, want: ops("PutItem", 1), noOld: 1,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				e := keyedReq(env, "POST", "/runs", tripCreate)
				env.inFlight(t, e)
				return e
			}},
		{method: "POST", pattern: "/runs", outcome: "mismatch", status: 409, want: ops("PutItem", 1), noOld: 1,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return mismatchOf(t, env, keyedReq(env, "POST", "/runs", tripCreate), 201, `{"workflowId":"conformance-noop","inputs":{"n":2}}`)
			}},
		{method: "POST", pattern: "/runs", outcome: "another tenant in the body", status: 403, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", "/runs", `{"workflowId":"conformance-noop","tenantId":"globex"}`)
			}},
		// Refused for the body alone (its members, its workflow) before
		// the claim: nothing written (RED_TEAM 522).
		{method: "POST", pattern: "/runs", outcome: "validation refusal", status: 400, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", "/runs", `{"workflowId":"conformance-noop","bogus":1}`)
			}},
		{method: "POST", pattern: "/runs", outcome: "unknown workflow", status: 400, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", "/runs", `{"workflowId":"no-such-workflow"}`)
			}},
		// A refusal the policy records (422 capability_required) stays
		// under the claim: the claim and its completion.
		{method: "POST", pattern: "/runs", outcome: "refusal recorded (an eval run)", status: 422, want: ops("PutItem", 2),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", "/runs", `{"workflowId":"conformance-noop","mode":"eval"}`)
			}},
		{method: "POST", pattern: "/runs", outcome: "refused before the claim (a body over 256 KiB)", status: 413, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", "/runs", `{"workflowId":"conformance-noop","inputs":{"pad":"`+strings.Repeat("x", 256<<10)+`"}}`)
			}},
		{method: "POST", pattern: "/runs", outcome: "refused before the claim (the force-engine header)", status: 403, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				e := keyedReq(env, "POST", "/runs", tripCreate)
				e.Headers["openwop-force-engine-version"] = "1"
				return e
			}},
	}
	for _, m := range []string{"GET", "HEAD"} {
		rows = append(rows, read(m, "", ops("GetItem", 1))...)
		// A HEAD of the effects reads the run alone: the projection is
		// content a HEAD never carries (RED_TEAM 493).
		effects := ops("GetItem", 1, "Query", 1)
		if m == "HEAD" {
			effects = ops("GetItem", 1)
		}
		rows = append(rows, read(m, "/effects", effects)...)
		rows = append(rows, read(m, "/events", ops("GetItem", 1))...)
		rows = append(rows, read(m, "/events/poll", ops("GetItem", 1))...)
	}

	// Keyed writes on one run.
	type write struct {
		pattern, suffix string
		from            runs.Status // the status the first execution needs ("": paused)
		body            string
		ok              int
		first, firstTx  map[string]int
		notFound, nfTx  map[string]int
		nfNoOld         int
		refused         runs.Status // a status the route refuses 409 ("": none)
		refusedOps      map[string]int
		refusedNoOld    int
	}
	for _, w := range []write{
		// A cancel of no run also writes its marker without transactions
		// (cancelUnwritten); it reads the run its failed write did not
		// return only where the engine returns no item (RED_TEAM 521).
		{pattern: "/runs/{runId}/cancel", suffix: "/cancel", from: runs.StatusRunning, ok: 200,
			first: ops("PutItem", 2, "UpdateItem", 1), notFound: ops("PutItem", 3, "UpdateItem", 1), nfTx: ops("PutItem", 2, "UpdateItem", 1), nfNoOld: 1,
			refused: runs.StatusCompleted, refusedOps: ops("PutItem", 2, "UpdateItem", 1), refusedNoOld: 1},
		{pattern: "/runs/{runId}/retry", suffix: "/retry", from: runs.StatusFailed, ok: 201,
			first: ops("PutItem", 3, "UpdateItem", 1, "GetItem", 1), firstTx: ops("PutItem", 1, "TransactWriteItems", 1, "GetItem", 1), notFound: ops("PutItem", 2, "GetItem", 1),
			refused: runs.StatusRunning, refusedOps: ops("PutItem", 2, "GetItem", 1)},
		{pattern: "/runs/{runId}:fork", suffix: ":fork", from: runs.StatusCompleted, body: `{"mode":"replay","fromSeq":0}`, ok: 201,
			first: ops("PutItem", 3, "GetItem", 1), firstTx: ops("PutItem", 1, "TransactWriteItems", 1, "GetItem", 1), notFound: ops("PutItem", 2, "GetItem", 1)},
		{pattern: "/runs/{runId}:pause", suffix: ":pause", from: runs.StatusRunning, ok: 202,
			first: ops("PutItem", 2, "UpdateItem", 1, "GetItem", 1), notFound: ops("PutItem", 2, "GetItem", 1),
			refused: runs.StatusCompleted, refusedOps: ops("PutItem", 2, "GetItem", 1)},
		{pattern: "/runs/{runId}:resume", suffix: ":resume", ok: 202,
			first: ops("PutItem", 2, "UpdateItem", 1, "GetItem", 1), notFound: ops("PutItem", 2, "GetItem", 1),
			refused: runs.StatusCompleted, refusedOps: ops("PutItem", 2, "GetItem", 1)},
	} {
		first := func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
			var r runs.Run
			if w.from == "" {
				r = env.run(t, "acme", runs.StatusRunning)
				env.do(t, keyedReq(env, "POST", runPath(r, ":pause"), ""), 202)
			} else {
				r = env.run(t, "acme", w.from)
			}
			return keyedReq(env, "POST", runPath(r, w.suffix), w.body)
		}
		rows = append(rows,
			tripRow{method: "POST", pattern: w.pattern, outcome: "first execution", status: w.ok, want: w.first, tx: w.firstTx, req: first},
			tripRow{method: "POST", pattern: w.pattern, outcome: "replay", status: w.ok, want: ops("PutItem", 1), noOld: 1,
				req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
					return replayOf(t, env, first(t, env), w.ok)
				}},
			tripRow{method: "POST", pattern: w.pattern, outcome: "not found", status: 404, want: w.notFound, tx: w.nfTx, noOld: w.nfNoOld,
				req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
					return keyedReq(env, "POST", runPath(missing(), w.suffix), w.body)
				}},
			tripRow{method: "POST", pattern: w.pattern, outcome: "another tenant", status: 403, want: none,
				req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
					return keyedReq(env, "POST", runPath(other(), w.suffix), w.body)
				}},
		)
		if w.refused != "" {
			rows = append(rows, tripRow{method: "POST", pattern: w.pattern, outcome: "refused by the run's status", status: 409, want: w.refusedOps, noOld: w.refusedNoOld,
				req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
					return keyedReq(env, "POST", runPath(env.run(t, "acme", w.refused), w.suffix), w.body)
				}})
		}
	}
	rows = append(rows,
		// Refused before the claim, as createRun's body (RED_TEAM 522).
		tripRow{method: "POST", pattern: "/runs/{runId}:fork", outcome: "validation refusal", status: 400, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", runPath(env.run(t, "acme", runs.StatusCompleted), ":fork"), `{"mode":"bogus"}`)
			}},
		tripRow{method: "POST", pattern: "/runs:bulk-cancel", outcome: "first execution, two live runs", status: 200, want: ops("PutItem", 2, "UpdateItem", 2),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", bulkPath, bulkBody("", env.run(t, "acme", runs.StatusRunning).ID, env.run(t, "acme", runs.StatusRunning).ID))
			}},
		tripRow{method: "POST", pattern: "/runs:bulk-cancel", outcome: "replay", status: 200, want: ops("PutItem", 1), noOld: 1,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return replayOf(t, env, keyedReq(env, "POST", bulkPath, bulkBody("", env.run(t, "acme", runs.StatusRunning).ID)), 200)
			}},
		tripRow{method: "POST", pattern: "/runs:bulk-cancel", outcome: "another tenant's id", status: 200, want: ops("PutItem", 2),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", bulkPath, bulkBody("", other().ID))
			}},
		tripRow{method: "POST", pattern: "/runs:bulk-cancel", outcome: "not found", status: 200,
			want: ops("PutItem", 3, "UpdateItem", 1), tx: ops("PutItem", 2, "UpdateItem", 1), noOld: 1,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", bulkPath, bulkBody("", missing().ID))
			}},
		tripRow{method: "POST", pattern: "/runs:bulk-cancel", outcome: "validation refusal", status: 400, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", bulkPath, `{"runIds":[]}`)
			}},
		tripRow{method: "GET", pattern: "/inbox", outcome: "listed", status: 200, want: ops("GetItem", 1),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				env.entry(t)
				return ev("GET", "/inbox", "acme", "", "")
			}},
		// The inbox is always there (an empty list at worst): a HEAD
		// reads nothing (RED_TEAM 493).
		tripRow{method: "HEAD", pattern: "/inbox", outcome: "listed", status: 200, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return ev("HEAD", "/inbox", "acme", "", "")
			}},
		tripRow{method: "POST", pattern: "/inbox/{id}/discard", outcome: "first execution", status: 200, want: ops("PutItem", 2, "UpdateItem", 1),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", "/inbox/"+env.entry(t)+"/discard", "")
			}},
		tripRow{method: "POST", pattern: "/inbox/{id}/discard", outcome: "not found", status: 404, want: ops("PutItem", 2, "UpdateItem", 1), noOld: 1,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", "/inbox/"+tripEntryID(env)+"/discard", "")
			}},
		// Another tenant's entry is in another item: a plain miss, at a
		// plain miss's cost.
		tripRow{method: "POST", pattern: "/inbox/{id}/discard", outcome: "another tenant's entry", status: 404, want: ops("PutItem", 2, "UpdateItem", 1), noOld: 1,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", "/inbox/"+env.entryOf(t, "globex")+"/discard", "")
			}},
		tripRow{method: "POST", pattern: "/inbox/{id}/discard", outcome: "already decided", status: 409, want: ops("PutItem", 2, "UpdateItem", 1), noOld: 1,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				id := env.entry(t)
				env.do(t, keyedReq(env, "POST", "/inbox/"+id+"/discard", ""), 200)
				return keyedReq(env, "POST", "/inbox/"+id+"/discard", "")
			}},
		tripRow{method: "POST", pattern: "/inbox/{id}/resubmit", outcome: "first execution", status: 200, want: ops("PutItem", 2, "UpdateItem", 3, "GetItem", 2),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", "/inbox/"+env.entry(t)+"/resubmit", "")
			}},
		tripRow{method: "POST", pattern: "/inbox/{id}/resubmit", outcome: "not found", status: 404, want: ops("PutItem", 2, "GetItem", 1),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return keyedReq(env, "POST", "/inbox/"+tripEntryID(env)+"/resubmit", "")
			}},
		tripRow{method: "GET", pattern: "/host/effect-seams", outcome: "served", status: 200, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return ev("GET", "/host/effect-seams", "acme", "", "")
			}},
		tripRow{method: "HEAD", pattern: "/host/effect-seams", outcome: "served", status: 200, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return ev("HEAD", "/host/effect-seams", "acme", "", "")
			}},
		tripRow{method: "GET", pattern: "/.well-known/openwop", outcome: "served", status: 200, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return ev("GET", "/.well-known/openwop", "", "", "")
			}},
		tripRow{method: "GET", pattern: "/openapi.json", outcome: "served", status: 200, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return ev("GET", "/openapi.json", "", "", "")
			}},
		// The work-order routes' own counts under the ERP policy are
		// TestERPWorkOrderRoundTrips' and TestERPTestRoutePublicNeverTouchesStore's.
		tripRow{method: "POST", pattern: LiveWorkOrderPath, outcome: "first execution", status: 201, want: ops("PutItem", 2),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return liveWorkOrderReq(env.key(), "application/json", testWorkOrderJSON)
			}},
		tripRow{method: "POST", pattern: LiveWorkOrderPath, outcome: "replay", status: 201, want: ops("PutItem", 1), noOld: 1,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return replayOf(t, env, liveWorkOrderReq(env.key(), "application/json", testWorkOrderJSON), 201)
			}},
		tripRow{method: "POST", pattern: LiveWorkOrderPath, outcome: "validation refusal, before the claim", status: 400, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return liveWorkOrderReq(env.key(), "application/json", `{}`)
			}},
		tripRow{method: "POST", pattern: TestWorkOrderPath, outcome: "refused (not a work order)", status: 400, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return ev("POST", TestWorkOrderPath, "", "", `{}`)
			}},
	)
	return rows
}

// erpTripRows are the live work-order route's round trips under the ERP
// policy (keys required, the work-order contract).
func erpTripRows() []tripRow {
	wo := func(env *tripEnv, body string) events.APIGatewayV2HTTPRequest {
		env.n++
		return liveWorkOrderReq(fmt.Sprintf("ERP-WO-20260807-%06d", env.n), "application/json", body)
	}
	none := ops()
	return []tripRow{
		{method: "POST", pattern: LiveWorkOrderPath, outcome: "first execution (the ERP policy)", status: 201, want: ops("PutItem", 2),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest { return wo(env, testWorkOrderJSON) }},
		{method: "POST", pattern: LiveWorkOrderPath, outcome: "replay (the ERP policy)", status: 201, want: ops("PutItem", 1), noOld: 1,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return replayOf(t, env, wo(env, testWorkOrderJSON), 201)
			}},
		{method: "POST", pattern: LiveWorkOrderPath, outcome: "mismatch (the ERP policy)", status: 409, want: ops("PutItem", 1), noOld: 1,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return mismatchOf(t, env, wo(env, testWorkOrderJSON), 201, `{"work_order_number":"WO-2","projects":[{"code":"p-1","name":"Pump","quantity":2}]}`)
			}},
		{method: "POST", pattern: LiveWorkOrderPath, outcome: "no project processed, recorded (the ERP policy)", status: 409, want: ops("PutItem", 2),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return wo(env, `{"work_order_number":"WO-3","projects":[{"code":"p-1","name":"Pump","quantity":100000}]}`)
			}},
		{method: "POST", pattern: LiveWorkOrderPath, outcome: "validation refusal, before the claim (the ERP policy)", status: 400, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest { return wo(env, `{}`) }},
		{method: "POST", pattern: LiveWorkOrderPath, outcome: "no key, keys not required (the ERP policy)", status: 201, want: none,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return liveWorkOrderReq("", "application/json", testWorkOrderJSON)
			}},
	}
}

// commerceTripRows are the paths the commerce policy changes: a
// run-creating key's replay reads the run, and the inbox's entries are
// each one caller's (one read more to find it).
func commerceTripRows() []tripRow {
	const sfx = " (the commerce policy)"
	create := func(env *tripEnv) events.APIGatewayV2HTTPRequest {
		e := commerceReq("POST", "/runs", env.key())
		e.Body, e.Headers["content-type"] = tripCreate, "application/json"
		return e
	}
	// entry keeps an entry of caller's (the checkout worker's when
	// other is false, another worker's of the same tenant when true).
	entry := func(t *testing.T, env *tripEnv, other bool) string {
		t.Helper()
		ev := commerceReq("GET", "/inbox", "")
		if other {
			ev.RequestContext.Authorizer.Lambda["worker"] = "refunds"
		}
		r := env.run(t, "acme", runs.StatusRunning)
		id := tripEntryID(env)
		if err := env.ib.Keep(context.Background(), inbox.Entry{ID: id, Tenant: "acme", Caller: env.f.h.callerOf(ev), Operation: "cancelRun",
			RecordID: r.ID, DecidedVersion: 1, CurrentVersion: r.Version, CreatedAt: time.Now()}, ""); err != nil {
			t.Fatal(err)
		}
		return id
	}
	return []tripRow{
		{method: "POST", pattern: "/runs", outcome: "first execution" + sfx, status: 201, want: ops("PutItem", 3), tx: ops("PutItem", 1, "TransactWriteItems", 1),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest { return create(env) }},
		{method: "POST", pattern: "/runs", outcome: "replay, the run read as it is now (still pending: 202)" + sfx, status: 202, want: ops("PutItem", 1, "GetItem", 1), noOld: 1,
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return replayOf(t, env, create(env), 201)
			}},
		{method: "POST", pattern: "/inbox/{id}/discard", outcome: "first execution" + sfx, status: 200, want: ops("PutItem", 2, "GetItem", 1, "UpdateItem", 1),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return commerceReq("POST", "/inbox/"+entry(t, env, false)+"/discard", env.key())
			}},
		{method: "POST", pattern: "/inbox/{id}/discard", outcome: "another caller's entry, as no entry" + sfx, status: 404, want: ops("PutItem", 2, "GetItem", 1),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return commerceReq("POST", "/inbox/"+entry(t, env, true)+"/discard", env.key())
			}},
		{method: "POST", pattern: "/inbox/{id}/discard", outcome: "no such entry" + sfx, status: 404, want: ops("PutItem", 2, "GetItem", 1),
			req: func(t *testing.T, env *tripEnv) events.APIGatewayV2HTTPRequest {
				return commerceReq("POST", "/inbox/"+tripEntryID(env)+"/discard", env.key())
			}},
	}
}

var printTrips = os.Getenv("IDEMKIT_PRINT_TRIPS") != ""

// TestRoundTripsPerRoute pins the DynamoDB round trips of every route of
// the run API, per outcome, on every engine, with the runs written
// transactionally and not: the table of docs/PERFORMANCE.md's "Round
// trips per request".
func TestRoundTripsPerRoute(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, tx := range []bool{false, true} {
			if tx && !e.Caps.Transactions {
				continue
			}
			t.Run(fmt.Sprintf("transactional=%v", tx), func(t *testing.T) {
				openwop, erpEnv, commerceEnv := newTripEnv(t, e, tx, idem.Policy{}), newTripEnv(t, e, tx, erp.Policy), newTripEnv(t, e, tx, commerce.Policy)
				for _, row := range slices.Concat(tripRows(), erpTripRows(), commerceTripRows()) {
					env := openwop
					switch {
					case strings.HasSuffix(row.outcome, "(the ERP policy)"):
						env = erpEnv
					case strings.HasSuffix(row.outcome, "(the commerce policy)"):
						env = commerceEnv
					}
					name := row.method + " " + row.pattern + ": " + row.outcome
					req := row.req(t, env)
					env.cnt.Reset()
					resp, err := env.f.h.Handle(context.Background(), req)
					got := env.cnt.Ops()
					env.finish()
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if printTrips {
						t.Logf("TRIP|%s|%v|%s|%d|%v|%.200s", e.Kind, tx, name, resp.StatusCode, got, resp.Body)
						continue
					}
					want := maps.Clone(row.want)
					if tx && row.tx != nil {
						want = maps.Clone(row.tx)
					}
					if !e.Caps.ReturnValuesOnConditionCheckFailure && row.noOld > 0 {
						want["GetItem"] += row.noOld
					}
					if resp.StatusCode != row.status {
						t.Errorf("%s: %d %s, want %d", name, resp.StatusCode, resp.Body, row.status)
					}
					if !maps.Equal(got, want) {
						t.Errorf("%s: round trips %v, want %v", name, got, want)
					}
				}
			})
		}
	})
}

// TestEveryRouteHasRoundTripRows: every route of Routes has a row in
// tripRows and in docs/PERFORMANCE.md's "Round trips per request", so a
// route cannot ship without its round trips pinned and stated.
func TestEveryRouteHasRoundTripRows(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(dynamotest.RepoRoot(), "docs", "PERFORMANCE.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Round trips per request\n")
	if !ok {
		t.Fatal(`docs/PERFORMANCE.md has no section "## Round trips per request"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	pinned := map[string]bool{}
	for _, row := range tripRows() {
		pinned[row.method+" "+row.pattern] = true
	}
	for _, r := range Routes {
		k := r.Method + " " + r.Pattern
		if !pinned[k] {
			t.Errorf("route %s has no row in tripRows (roundtrips_test.go)", k)
		}
		if !slices.ContainsFunc(strings.Split(section, "\n"), func(l string) bool {
			return strings.HasPrefix(l, "| ") && strings.Contains(l, "`"+k+"`")
		}) {
			t.Errorf("route %s has no row in docs/PERFORMANCE.md's \"Round trips per request\"", k)
		}
	}
}
