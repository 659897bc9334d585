package regionsim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/auditor/auditfn"
	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/regionsim"
	"github.com/idemkit/idemkit/ledger/fence"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// audited is Layer 1 under reconciled-records in eu and us (or the regions
// of auditedConfig.regions): in each region
// a guard over POST /runs on its replica of one IdempotencyTable and a
// conflict auditor restoring into that replica, which reads every stream
// change the replicator observes. The conflict events of both auditors are
// logged to one buffer.
type audited struct {
	t     *testing.T
	cfg   auditedConfig
	p     *pair
	clock *ledgertest.Clock
	rep   *regionsim.Replicator
	srv   map[string]*httptest.Server

	mu   sync.Mutex // guards logs
	logs bytes.Buffer

	auditors map[string]*auditfn.Auditor
	auditErr error              // the last restore error of an audit
	restored map[string]int     // region -> records its auditor wrote back
	seen     []regionsim.Change // with redelivery, every change audited
}

// auditedConfig sets up audited.
type auditedConfig struct {
	// redeliver audits every change twice as it happens (a batch retried)
	// and keeps it in seen, for redeliverSeen.
	redeliver bool
	// keep keeps every change audited in seen, audited once.
	keep bool
	// ttlRemoves has every REMOVE read as TTL's (the service principal),
	// in both regions: a TTL deletion and its replication.
	ttlRemoves bool
	// guardClock, when set, is region r's guard clock (idem.TestConfig).
	guardClock func(r string) idem.Clock
	// handler is region r's POST /runs handler, under the guard.
	handler func(r string) http.HandlerFunc
	// regions are the replicas; default eu and us.
	regions []string
}

func newAudited(t *testing.T, cfg auditedConfig) *audited {
	t.Helper()
	if len(cfg.regions) == 0 {
		cfg.regions = []string{eu, us}
	}
	w := &audited{t: t, cfg: cfg, p: newReplicas(t, "IdempotencyTable", cfg.regions...),
		clock: ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)),
		srv:   map[string]*httptest.Server{}, auditors: map[string]*auditfn.Auditor{}, restored: map[string]int{}}
	for _, r := range cfg.regions {
		st, err := idemdynamo.New(idemdynamo.Config{Client: w.p.db(r), Table: w.p.tables[r]})
		if err != nil {
			t.Fatal(err)
		}
		gcfg := idem.Config{Store: st, HTTPTenant: func(*http.Request) (string, bool) { return "acme", true },
			Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
		if cfg.guardClock != nil {
			gcfg.Test = idem.TestConfig{Clock: cfg.guardClock(r)}
		}
		g, err := idem.New(gcfg)
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("POST /runs", g.Middleware(cfg.handler(r)))
		w.srv[r] = httptest.NewServer(mux)
		t.Cleanup(w.srv[r].Close)
		ca, err := conflictaudit.New(conflictaudit.Config{Strategy: fence.ReconciledRecords, Region: r, KeyHashSecret: "deployment-secret",
			Log: slog.New(slog.NewJSONHandler(&lockedWriter{mu: &w.mu, w: &w.logs}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		w.auditors[r] = &auditfn.Auditor{Conflicts: ca, Now: w.clock.Now, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			Restore: auditfn.TableRestorer{Client: w.p.db(r), Table: w.p.tables[r]}}
	}
	rep, err := newReplicator(t, regionsim.Config{Regions: w.p.replicas(), Lag: time.Second, Now: w.clock.Now,
		OnChange: func(c regionsim.Change) {
			w.audit(c)
			if cfg.redeliver {
				w.audit(c)
			}
			if cfg.redeliver || cfg.keep {
				w.seen = append(w.seen, c)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	w.rep = rep
	return w
}

// audit has c's region's auditor read c.
func (w *audited) audit(c regionsim.Change) {
	rec := stream.StreamRecord{EventName: c.Event, Keys: c.Keys, OldImage: c.Old, NewImage: c.New}
	if w.cfg.ttlRemoves && c.Event == "REMOVE" {
		rec.PrincipalID, rec.IdentityType = stream.TTLPrincipal, "Service"
	}
	cnt := w.auditors[c.Region].Audit(ctx(w.t), []stream.StreamRecord{rec})
	if cnt.RestoreErr != nil {
		w.auditErr = cnt.RestoreErr
	}
	w.restored[c.Region] += cnt.Restored
}

// redeliverSeen audits every change seen again, in reverse order (a stale,
// out-of-order redelivery).
func (w *audited) redeliverSeen() {
	for i := len(w.seen) - 1; i >= 0; i-- {
		w.audit(w.seen[i])
	}
}

// post sends region r a POST /runs with key1. It may be called from another
// goroutine: a failed request is reported with t.Error and answers an empty
// response.
func (w *audited) post(r string) (*http.Response, string) {
	req, _ := http.NewRequest(http.MethodPost, w.srv[r].URL+"/runs", strings.NewReader(`{"workflow":"w1"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idem.HeaderKey, key1)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Error(err)
		return &http.Response{}, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// sync replicates everything, three times over two seconds each: heal,
// then let any restore replicate.
func (w *audited) sync() {
	w.t.Helper()
	for range 3 {
		w.clock.Advance(2 * time.Second)
		if err := w.rep.Sync(ctx(w.t)); err != nil {
			w.t.Fatal(err)
		}
	}
}

// step has the replicator observe the next changes, then advances the
// clock by advance (not at all when it is 0).
func (w *audited) step(advance time.Duration) {
	w.t.Helper()
	if _, err := w.rep.Step(ctx(w.t)); err != nil {
		w.t.Fatal(err)
	}
	if advance > 0 {
		w.clock.Advance(advance)
	}
}

// heal ends the partition and replicates everything (with redeliver, then
// audits every change seen again in reverse order and replicates again),
// and fails the test on an audit's restore error.
func (w *audited) heal(redeliver bool) {
	w.t.Helper()
	w.rep.SetPartitioned(false)
	w.sync()
	if redeliver {
		w.redeliverSeen()
		w.sync()
	}
	if w.auditErr != nil {
		w.t.Fatal(w.auditErr)
	}
}

// events are the Layer-1 conflict events logged so far, and the whole log.
func (w *audited) events() ([]map[string]any, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return conflictEvents(w.t, w.logs.String()), w.logs.String()
}

// conflictEvents are the Layer-1 conflict log lines in out.
func conflictEvents(t *testing.T, out string) []map[string]any {
	var evs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if line == "" || json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if m["msg"] == "cross_region_conflict" && m["kind"] == conflictaudit.KindKey {
			evs = append(evs, m)
		}
	}
	return evs
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
