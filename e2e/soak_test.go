package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/emulator/proc"
	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/soak"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
)

// The soak: mixed load against `idemkit dev` on DynamoDB Local (on disk)
// while a chaos loop kills dev (SIGKILL), pauses and kills the engine, and
// a fault proxy between dev and the engine delays requests, drops answers
// after the write applied, and throttles. Every keyed attempt is recorded
// and the history is checked per key for linearizability (internal/soak),
// then the tables are checked after recovery:
//   - at most one run per key;
//   - every run id a 2xx named exists and is terminal after recovery;
//   - every webhook delivery beyond the first under a provider key is
//     matched by an escaped attempt in the effects witness;
//   - every 5xx is a 503 with Retry-After.
//
// SOAK_DURATION sets the load's length (default 60 s: the short lane in
// `make test`; `make soak DURATION=60m` runs the hour). SOAK_HISTORY, when
// set, is a file the history is written to (JSON lines).

// verdictMark makes `make test`'s summary repeat a log line (the
// testsummary's VerdictMark).
const verdictMark = "idemkit-verdict: "

const (
	soakKey    = "idk_soak_tenant_0123456789abcdef"
	soakTenant = "soak"
	// soakRequestTimeout is dev's --request-timeout: with it, an abandoned
	// claim's lease is capped at this plus the lease skew.
	soakRequestTimeout = 10 * time.Second
)

func soakDuration(t *testing.T) time.Duration {
	s := os.Getenv("SOAK_DURATION")
	if s == "" {
		return 60 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("SOAK_DURATION=%q: %v", s, err)
	}
	return d
}

// TestSoak is the checked soak with chaos.
func TestSoak(t *testing.T) {
	rep := runSoak(t, soakPlan{duration: soakDuration(t), chaos: true, clients: 6})
	if rep.lin.Verdict != porcupine.Ok {
		for _, k := range rep.lin.Illegal {
			t.Errorf("key %s is not linearizable:\n%s", k, rep.lin.Explain[k])
		}
		t.Fatalf("%s", rep.lin)
	}
	if n := len(rep.violations); n > 0 {
		shown := rep.violations[:min(n, 40)]
		t.Fatalf("%d table or answer violations (the first %d):\n%s", n, len(shown), strings.Join(shown, "\n"))
	}
}

// excuseEngineLoss takes out of lin's illegal keys those whose
// acknowledged run the engine lost (missingRuns: a SIGKILL after the
// request, the run and its Layer-1 completion both missing): the engine
// forgot a write it had acknowledged, so the key's later answers (in
// flight, then a fresh claim) follow the engine's state, not the 201 read
// before it. DynamoDB Local keeps no acknowledged write across a SIGKILL
// (docs/engines.md); DynamoDB does. Every other illegal key stays illegal,
// and the verdict is Ok only when none is left.
func excuseEngineLoss(logf func(format string, args ...any), lin soak.Report, lostKeys []string) soak.Report {
	if lin.Verdict != porcupine.Illegal || len(lostKeys) == 0 {
		return lin
	}
	var kept, excused []string
	for _, k := range lin.Illegal {
		if slices.ContainsFunc(lostKeys, func(key string) bool { return strings.HasSuffix(k, " "+key) }) {
			excused = append(excused, k)
		} else {
			kept = append(kept, k)
		}
	}
	if len(excused) == 0 {
		return lin
	}
	lin.Illegal = kept
	if len(kept) == 0 {
		lin.Verdict = porcupine.Ok
		if len(lin.Undecided) > 0 {
			lin.Verdict = porcupine.Unknown
		}
	}
	logf(verdictMark+"soak: %d key(s) illegal only after the engine lost their acknowledged run (not counted): %s; now %s", len(excused), strings.Join(excused, ", "), lin)
	return lin
}

// TestSoakMutant proves the checker bites: dev built with a mutation that
// replays a key's answer to another payload (the digest comparison
// skipped) must make the linearizability check report Illegal.
func TestSoakMutant(t *testing.T) {
	rep := runSoak(t, soakPlan{duration: 15 * time.Second, clients: 4, tags: "idemkit_mutant_replay_mismatch", probes: true})
	if rep.lin.Verdict != porcupine.Illegal {
		t.Fatalf("the mutant passed the checker: %s", rep.lin)
	}
	t.Logf(verdictMark+"the mutant (a mismatch answered with a replay) is caught: %s", rep.lin)
}

type soakPlan struct {
	duration time.Duration
	chaos    bool
	clients  int
	// tags builds dev with these build tags (a mutant).
	tags string
	// probes makes every client alternate new keys and mismatch probes
	// (the mutant lane).
	probes bool
}

type soakReport struct {
	lin        soak.Report
	violations []string
}

// soakEngine is DynamoDB Local on disk, restartable on its data and port.
type soakEngine struct {
	t *testing.T
	o emulator.Options
	s *emulator.Server
}

func (e *soakEngine) start(ctx context.Context) {
	e.t.Helper()
	s, err := emulator.Start(ctx, emulator.DynamoDBLocal, e.o)
	if err != nil {
		testutil.Unavailable(e.t, "DynamoDB Local unavailable: %v", err)
	}
	e.s = s
}

// soakDev is a restartable `idemkit dev` on a fixed address.
type soakDev struct {
	t        *testing.T
	bin      string
	addr     string
	endpoint string
	mu       sync.Mutex
	p        *testutil.Process
}

func (d *soakDev) start(ctx context.Context) {
	d.t.Helper()
	env := append(os.Environ(), "RUN_STALE_SECONDS=5", "STREAM_RETRY_SECONDS=30")
	p := start(d.t, env, d.bin, "dev", "--addr", d.addr, "--dynamodb-endpoint", d.endpoint,
		"--table-prefix", "soak-", "--request-timeout", soakRequestTimeout.String(),
		"--allow-loopback-webhooks", "--api-key", soakKey+"="+soakTenant)
	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := testutil.WaitHTTP(rctx, "http://"+d.addr+"/.well-known/openwop", p.Done()); err != nil {
		d.t.Fatalf("idemkit dev not ready: %v\n%s", err, p.Log.String())
	}
	d.mu.Lock()
	d.p = p
	d.mu.Unlock()
}

// kill is kill -9 of dev's process group.
func (d *soakDev) kill() {
	d.mu.Lock()
	p := d.p
	d.mu.Unlock()
	_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
	<-p.Done()
}

// soakReceiver is a webhook provider that counts deliveries per
// Idempotency-Key (the provider key).
type soakReceiver struct {
	*httptest.Server
	mu sync.Mutex
	by map[string]int
}

func newSoakReceiver(t *testing.T) *soakReceiver {
	rv := &soakReceiver{by: map[string]int{}}
	rv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		rv.mu.Lock()
		rv.by[r.Header.Get("Idempotency-Key")]++
		rv.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rv.Close)
	return rv
}

// soakKeyed is a key a client used and the body it first sent under it.
type soakKeyed struct {
	key, body string
	webhook   bool
}

// soakState is what the clients share.
type soakState struct {
	rec    *soak.Recorder
	url    string
	hook   string
	client *http.Client

	mu   sync.Mutex
	keys []soakKeyed
	// runs are the run ids named by a 2xx of POST /runs, each with its
	// key, when the key's first request was sent and when the first such
	// answer was read; firstSent is when each key's first request was
	// sent.
	runs      map[string]ackedRun
	firstSent map[string]time.Time
	bad       []string // answer violations (a 5xx that is not a 503 with Retry-After)
	sent      atomic.Int64
}

func soakID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// post sends one keyed request and records it when keyed is set; it
// returns the answer's decoded body (nil without an answer).
func (s *soakState) post(client int, path, key, body string, keyed bool) map[string]any {
	req, err := http.NewRequest("POST", s.url+path, strings.NewReader(body))
	if err != nil {
		return nil
	}
	req.Header.Set("Authorization", testutil.Bearer(soakKey))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	a := soak.Attempt{Client: client, Key: path + " " + key, Body: soak.Digest([]byte(body)), Start: s.rec.Now()}
	// wrote is set once the request was written to a connection: net/http
	// retries a request with an Idempotency-Key on a fresh connection when
	// a reused one broke, so a dial error can follow a write that dev
	// received and acted on. Only a request never written is "never sent".
	var wrote atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	}))
	resp, err := s.client.Do(req)
	if err != nil {
		var op *net.OpError
		if !wrote.Load() && errors.As(err, &op) && op.Op == "dial" {
			return nil // never sent: dev is down
		}
		a.GaveUp = s.rec.Now()
		s.sent.Add(1)
		if keyed {
			s.rec.Add(a)
		}
		return nil
	}
	b, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	s.sent.Add(1)
	if rerr != nil {
		a.GaveUp = s.rec.Now()
		if keyed {
			s.rec.Add(a)
		}
		return nil
	}
	a.End, a.Answered, a.Status, a.Answer = s.rec.Now(), true, resp.StatusCode, soak.Digest(b)
	a.Replayed = resp.Header.Get("OpenWOP-Idempotent-Replay") == "true"
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	a.Code, _ = m["error"].(string)
	a.RunID, _ = m["runId"].(string)
	if resp.StatusCode >= 500 && (resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "") {
		s.mu.Lock()
		s.bad = append(s.bad, fmt.Sprintf("POST %s: %d %s (Retry-After %q)", path, resp.StatusCode, b, resp.Header.Get("Retry-After")))
		s.mu.Unlock()
	}
	if keyed {
		s.rec.Add(a)
	}
	return m
}

// createRun posts body under key and notes the run a 2xx names.
func (s *soakState) createRun(client int, key, body string) {
	s.mu.Lock()
	if _, seen := s.firstSent[key]; !seen {
		s.firstSent[key] = time.Now()
	}
	s.mu.Unlock()
	m := s.post(client, "/runs", key, body, true)
	if id, ok := m["runId"].(string); ok && id != "" {
		at := time.Now()
		s.mu.Lock()
		if _, seen := s.runs[id]; !seen {
			s.runs[id] = ackedRun{ID: id, Key: key, Sent: s.firstSent[key], Acked: at}
		}
		s.mu.Unlock()
	}
}

func (s *soakState) pick(r *mrand.Rand) (soakKeyed, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.keys) == 0 {
		return soakKeyed{}, false
	}
	return s.keys[r.IntN(len(s.keys))], true
}

func (s *soakState) pickRun(r *mrand.Rand) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.runs { // map order is random enough
		if r.IntN(4) == 0 {
			return id, true
		}
	}
	return "", false
}

func (s *soakState) remember(k soakKeyed) {
	s.mu.Lock()
	s.keys = append(s.keys, k)
	s.mu.Unlock()
}

// step is one client action of the mixed load.
func (s *soakState) step(client int, r *mrand.Rand, probes bool) {
	noop := func(k string, v int) string {
		return fmt.Sprintf(`{"workflowId":"conformance-noop","inputs":{"soak":%q,"v":%d}}`, k, v)
	}
	x := r.IntN(100)
	if probes {
		x = []int{0, 60}[r.IntN(2)]
	}
	switch {
	case x < 30: // a new key
		k := "soak-" + soakID()
		b := noop(k, 0)
		s.remember(soakKeyed{key: k, body: b})
		s.createRun(client, k, b)
	case x < 45: // a replay of a key already used
		if k, ok := s.pick(r); ok {
			s.createRun(client, k.key, k.body)
		}
	case x < 55: // racing same-key clients
		k := "soak-" + soakID()
		b := noop(k, 0)
		s.remember(soakKeyed{key: k, body: b})
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() { defer wg.Done(); s.createRun(1000+client*10+i, k, b) }()
		}
		wg.Wait()
	case x < 70: // a mismatch probe: the key with another body
		if k, ok := s.pick(r); ok {
			s.createRun(client, k.key, strings.Replace(k.body, `"v":0`, `"v":1`, 1))
		}
	case x < 80: // a webhook run (a provider effect)
		k := "soak-" + soakID()
		b := fmt.Sprintf(`{"workflowId":"webhook","inputs":{"url":%q,"payload":{"soak":%q,"v":0}}}`, s.hook, k)
		s.remember(soakKeyed{key: k, body: b, webhook: true})
		s.createRun(client, k, b)
	case x < 90: // a cancel of some run
		if id, ok := s.pickRun(r); ok {
			s.post(client, "/runs/"+strings.ReplaceAll(id, "/", "~2F")+"/cancel", "soak-c-"+soakID(), `{}`, false)
		}
	default: // a fork of some run
		if id, ok := s.pickRun(r); ok {
			s.post(client, "/runs/"+strings.ReplaceAll(id, "/", "~2F")+":fork", "soak-f-"+soakID(), `{"mode":"replay"}`, false)
		}
	}
}

func runSoak(t *testing.T, plan soakPlan) soakReport {
	if _, err := os.Stat(shared.ModuleRoot()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*plan.duration+20*time.Minute)
	defer cancel()

	port, err := proc.FreePort()
	must(t, err)
	eng := &soakEngine{t: t, o: emulator.Options{ToolsDir: filepath.Join(shared.ModuleRoot(), "tools"), DBPath: t.TempDir(), Port: port, SharedDB: true}}
	eng.start(ctx)
	defer func() {
		_ = syscall.Kill(-eng.s.PID(), syscall.SIGCONT)
		eng.s.Stop()
	}()
	px, err := soak.NewProxy(eng.s.Endpoint)
	must(t, err)
	defer px.Close()

	dir := t.TempDir()
	flags := []string{"-trimpath"}
	if plan.tags != "" {
		flags = append(flags, "-tags="+plan.tags)
	}
	bin, err := testutil.Build(dir, "idemkit", "cmd/idemkit", flags, []string{"CGO_ENABLED=0"})
	must(t, err)
	dev := &soakDev{t: t, bin: bin, addr: testutil.FreeAddr(t), endpoint: px.URL}
	dev.start(ctx)
	rv := newSoakReceiver(t)

	st := &soakState{rec: soak.NewRecorder(), url: "http://" + dev.addr, hook: rv.URL + "/hook",
		client: &http.Client{Timeout: 30 * time.Second}, runs: map[string]ackedRun{}, firstSent: map[string]time.Time{}}

	// The load.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range plan.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), uint64(c)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				st.step(c, r, plan.probes)
			}
		}()
	}

	// The chaos.
	var devKills, enginePauses, engineKills int
	var killedAt []time.Time // when the engine was SIGKILLed
	if plan.chaos {
		px.SetFaults(soak.Faults{Delay: 0.05, MaxDelay: 300 * time.Millisecond, Drop: 0.02, Throttle: 0.02})
	}
	r := mrand.New(mrand.NewPCG(uint64(time.Now().UnixNano()), 99))
	deadline := time.After(plan.duration)
chaos:
	for {
		select {
		case <-deadline:
			break chaos
		case <-time.After(time.Duration(3000+r.IntN(4000)) * time.Millisecond):
		}
		if !plan.chaos {
			continue
		}
		switch r.IntN(3) {
		case 0:
			devKills++
			dev.kill()
			time.Sleep(time.Duration(200+r.IntN(1000)) * time.Millisecond)
			dev.start(ctx)
		case 1:
			enginePauses++
			_ = syscall.Kill(-eng.s.PID(), syscall.SIGSTOP)
			time.Sleep(time.Duration(500+r.IntN(2500)) * time.Millisecond)
			_ = syscall.Kill(-eng.s.PID(), syscall.SIGCONT)
		case 2:
			engineKills++
			// The kill's time is read once the signal is sent (see
			// settle_test.go): every request sent before the kill is
			// then sent before it, however late this goroutine runs.
			_ = syscall.Kill(-eng.s.PID(), syscall.SIGKILL)
			killedAt = append(killedAt, time.Now())
			eng.s.Stop()
			time.Sleep(time.Duration(200+r.IntN(1000)) * time.Millisecond)
			eng.start(ctx)
		}
	}
	close(stop)
	wg.Wait()
	px.SetFaults(soak.Faults{})
	faults := px.Counts()

	rep := soakReport{}
	// The search's time limit per key is a hang guard, not a speed limit:
	// a key the search cannot decide in time is Unknown, which fails the
	// soak, and a loaded machine slows the search too (its default is 10 s).
	rep.lin = soak.Check(st.rec.Attempts(), soak.Options{Horizon: soakRequestTimeout + 40*time.Second, Timeout: 3 * time.Minute})
	if p := os.Getenv("SOAK_HISTORY"); p != "" {
		f, err := os.Create(p)
		must(t, err)
		must(t, st.rec.WriteJSONL(f))
		must(t, f.Close())
	}
	t.Logf(verdictMark+"soak: %s of load, %d requests sent, %d keyed attempts on %d keys; faults: %d dev kills, %d engine pauses, %d engine kills, proxy %d delays, %d dropped answers, %d throttles of %d requests",
		plan.duration, st.sent.Load(), rep.lin.Attempts, rep.lin.Keys, devKills, enginePauses, engineKills, faults.Delays, faults.Drops, faults.Throttles, faults.Requests)
	t.Logf(verdictMark+"soak: %s", rep.lin)
	if plan.probes {
		return rep // the mutant lane reads only the verdict
	}

	// Recovery: every run a 2xx named settles.
	rep.violations = append(rep.violations, st.bad...)
	st.mu.Lock()
	ids := make([]string, 0, len(st.runs))
	for id := range st.runs {
		ids = append(ids, id)
	}
	st.mu.Unlock()
	client := emulator.Client(eng.s.Endpoint)
	settled := waitSettled(ctx, t, client, "soak-RunsTable", ids, 3*time.Minute)
	var missing, proof []ackedRun
	st.mu.Lock()
	for _, id := range ids {
		if s, ok := settled[id]; !ok {
			missing = append(missing, st.runs[id])
		} else if !terminal(s) {
			rep.violations = append(rep.violations, fmt.Sprintf("run %s is %s after recovery", id, s))
		} else if len(proof) < 100 {
			proof = append(proof, st.runs[id])
		}
	}
	st.mu.Unlock()
	// A missing run is the engine's loss only when a SIGKILL came after
	// its request and its whole transaction is missing (its key's Layer-1
	// record never completed: engineloss_test.go, docs/engines.md); any
	// other missing run is a violation.
	l1 := newLayer1Reader(t, client, "soak-IdempotencyTable", soakTenant)
	l1.checkLookup(ctx, t, proof)
	lost, missingViolations, lostKeys, maxGap := l1.missingRuns(ctx, t, missing, killedAt)
	for _, line := range lost {
		t.Logf("soak: lost by the engine: %s", line)
	}
	// A present run whose item was created after its 201 was read was
	// lost by the engine and created again by a later request under its
	// key, or is a violation (engineloss_test.go).
	created := map[string]time.Time{}
	for _, it := range scanAll(ctx, t, client, "soak-RunsTable") {
		pk, _ := it["pk"].(*types.AttributeValueMemberS)
		at, _ := it["createdAt"].(*types.AttributeValueMemberN)
		if pk == nil || at == nil {
			continue
		}
		ms, err := strconv.ParseInt(at.Value, 10, 64)
		must(t, err)
		created[pk.Value] = time.UnixMilli(ms)
	}
	st.mu.Lock()
	acked := make([]ackedRun, 0, len(st.runs))
	for _, r := range st.runs {
		acked = append(acked, r)
	}
	st.mu.Unlock()
	again, againViolations, againKeys := recreatedRuns(acked, created, killedAt)
	for _, line := range again {
		t.Logf("soak: lost by the engine and created again: %s", line)
	}
	rep.lin = excuseEngineLoss(t.Logf, rep.lin, append(lostKeys, againKeys...))
	rep.violations = append(rep.violations, missingViolations...)
	rep.violations = append(rep.violations, againViolations...)

	// At most one run per key (a fork or a retry copies its source's
	// inputs: those are the source's runs, not the key's).
	perKey := map[string]int{}
	var hooks []string // every webhook run in the table, acknowledged or not
	for _, it := range scanAll(ctx, t, client, "soak-RunsTable") {
		if wf, _ := it["workflowId"].(*types.AttributeValueMemberS); wf != nil && wf.Value == "webhook" {
			if pk, _ := it["pk"].(*types.AttributeValueMemberS); pk != nil {
				hooks = append(hooks, pk.Value)
			}
		}
		in, _ := it["inputs"].(*types.AttributeValueMemberS)
		_, fork := it["fork"]
		_, retry := it["retryOf"]
		if in == nil || fork || retry {
			continue
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(in.Value), &m)
		k, _ := m["soak"].(string)
		if p, ok := m["payload"].(map[string]any); ok && k == "" {
			k, _ = p["soak"].(string)
		}
		if k != "" {
			perKey[k]++
		}
	}
	for k, n := range perKey {
		if n > 1 {
			rep.violations = append(rep.violations, fmt.Sprintf("key %s has %d runs", k, n))
		}
	}

	// Every delivery beyond the first under a provider key is an escaped
	// attempt in the witness of a run in the table (a run whose 201 was
	// lost on the way to its client exists, runs and delivers too).
	lst, err := ledgerdynamo.New(ledgerdynamo.Config{Client: client, Table: "soak-EffectsTable"})
	must(t, err)
	l, err := ledger.New(ledger.Config{Store: lst})
	must(t, err)
	escaped, known := map[string]int{}, map[string]bool{}
	for _, id := range hooks {
		vs, err := l.ListEffects(ctx, ledger.Filter{RunID: id, Limit: 100})
		must(t, err)
		for _, v := range vs {
			rec, err := l.Lookup(ctx, v.EffectID)
			must(t, err)
			known[rec.ProviderKey] = true
			for _, a := range rec.Attempts {
				if a.State == ledger.AttemptEscaped {
					escaped[rec.ProviderKey]++
				}
			}
		}
	}
	rv.mu.Lock()
	deliveries := 0
	for pk, n := range rv.by {
		deliveries += n
		switch {
		case !known[pk]:
			rep.violations = append(rep.violations, fmt.Sprintf("%d deliveries under a provider key no run's witness holds", n))
		case n-1 > escaped[pk]:
			rep.violations = append(rep.violations, fmt.Sprintf("provider key %s: %d deliveries, %d escaped attempts", soak.Digest([]byte(pk)), n, escaped[pk]))
		}
	}
	rv.mu.Unlock()
	t.Logf(verdictMark+"soak: tables: %d acknowledged runs (%d webhook runs, %d deliveries), %d keys with a run; %d lost by the engine (a run missing whose whole transaction is missing, with one of the %d engine SIGKILLs after its request; largest gap from such a 201 to that kill %s, negative when the kill came first: docs/engines.md); %d lost by the engine and created again by a later request (an engine SIGKILL between its request and its creation); %d violations",
		len(ids), len(hooks), deliveries, len(perKey), len(lost), len(killedAt), maxGap.Round(time.Millisecond), len(again), len(rep.violations))
	return rep
}

func terminal(s string) bool { return s == "completed" || s == "failed" || s == "cancelled" }

// waitSettled reads the runs' statuses from the table until every one is
// terminal or wait is over.
func waitSettled(ctx context.Context, t *testing.T, c *dynamodb.Client, table string, ids []string, stall time.Duration) map[string]string {
	t.Helper()
	// Recovery is given as long as it makes progress: the wait ends when
	// every run is terminal or missing (absent from every consistent scan
	// for 10 s: the load has ended, and an acknowledged run was written
	// before its 201, so one missing now was lost and never comes back;
	// the caller judges it), or when no run settled for stall (a backlog
	// of thousands of runs settles at the executor's pace, not at once).
	const goneAfter = 10 * time.Second
	best, lastProgress := -1, time.Now()
	missingSince := map[string]time.Time{}
	for {
		st := map[string]string{}
		for _, it := range scanAll(ctx, t, c, table) {
			pk, _ := it["pk"].(*types.AttributeValueMemberS)
			s, _ := it["status"].(*types.AttributeValueMemberS)
			if pk != nil && s != nil {
				st[pk.Value] = s.Value
			}
		}
		settled, gone := 0, 0
		for _, id := range ids {
			s, ok := st[id]
			switch {
			case !ok:
				if _, seen := missingSince[id]; !seen {
					missingSince[id] = time.Now()
				}
				if time.Since(missingSince[id]) >= goneAfter {
					gone++
				}
			case terminal(s):
				settled++
				delete(missingSince, id)
			default:
				delete(missingSince, id)
			}
		}
		if settled > best {
			best, lastProgress = settled, time.Now()
		}
		if settled+gone == len(ids) || time.Since(lastProgress) > stall {
			t.Logf(verdictMark+"soak: recovery: %d of %d acknowledged runs terminal", settled, len(ids))
			return st
		}
		select {
		case <-ctx.Done():
			return st
		case <-time.After(2 * time.Second):
		}
	}
}

func scanAll(ctx context.Context, t *testing.T, c *dynamodb.Client, table string) []map[string]types.AttributeValue {
	t.Helper()
	var out []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(c, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		must(t, err)
		out = append(out, page.Items...)
	}
	return out
}
