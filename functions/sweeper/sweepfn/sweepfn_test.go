package sweepfn_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"github.com/idemkit/idemkit/idem/idemenv"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/sweeper/sweepfn"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/sweeper"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// syncBuf is a goroutine-safe writer (the handler sweeps tables
// concurrently and logs from each).
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// metrics parses EMF lines into "name table" -> summed value.
func metrics(t *testing.T, out string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("EMF line %q: %v", sc.Text(), err)
		}
		for _, name := range []string{sweepfn.MetricDeleted, sweepfn.MetricIncomplete} {
			if v, ok := rec[name].(float64); ok {
				m[name+" "+rec["table"].(string)] += v
			}
		}
	}
	return m
}

// seed writes n items to a table shaped like logicalID, with keys that
// must never appear in a log line; every third is live, the rest expired
// an hour before now. It returns the number expired.
func seed(t *testing.T, c *dynamodb.Client, table, logicalID string, n int, now time.Time) int {
	t.Helper()
	expired := 0
	for i := range n {
		exp := now.Add(-time.Hour)
		if i%3 == 0 {
			exp = now.Add(time.Hour)
		} else {
			expired++
		}
		item := map[string]types.AttributeValue{
			"pk":        &types.AttributeValueMemberS{Value: "secret-key-" + logicalID + strconv.Itoa(i)},
			"expiresAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(exp.Unix(), 10)},
		}
		if logicalID == "EffectsTable" {
			item["sk"] = &types.AttributeValueMemberS{Value: "record"}
		}
		if _, err := c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	return expired
}

func count(t *testing.T, c *dynamodb.Client, table string) int {
	t.Helper()
	out, err := c.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), Select: types.SelectCount})
	if err != nil {
		t.Fatal(err)
	}
	return int(out.Count)
}

type tables struct{ effects, fence, idem string }

func newTables(t *testing.T, e *dynamotest.Emulator) tables {
	return tables{e.CreateTable(t, "EffectsTable"), e.CreateTable(t, "FenceTable"), e.CreateTable(t, "IdempotencyTable")}
}

func (tb tables) env() settings.Env {
	return settings.Env{EffectsTable: tb.effects, FenceTable: tb.fence, Idem: idemenv.Env{Table: tb.idem}}
}

// The function, wired from the environment as main.go does and invoked
// with the scheduled event, sweeps every configured table, reports and
// emits deleted_total per table (dimension "table"), logs counts and never
// a key; the next run deletes nothing and still emits (0).
func TestHandleSweepsConfiguredTables(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client()
		tb := newTables(t, e)
		now := time.Now()
		want := map[string]int{
			sweepfn.TableEffects:     seed(t, c, tb.effects, "EffectsTable", 25, now),
			sweepfn.TableFence:       seed(t, c, tb.fence, "FenceTable", 13, now),
			sweepfn.TableIdempotency: seed(t, c, tb.idem, "IdempotencyTable", 7, now),
		}
		var out, logs syncBuf
		h, err := sweepfn.NewFromEnv(tb.env(), c, emf.New(&out, "idemkit"), slog.New(slog.NewJSONHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rep, err := h.Handle(ctx, events.CloudWatchEvent{DetailType: "Scheduled Event", Source: "aws.events"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Tables) != 3 {
			t.Fatalf("report %+v", rep)
		}
		for _, tr := range rep.Tables {
			if !tr.Complete || tr.Deleted != want[tr.Table] || tr.Error != "" {
				t.Fatalf("%s: %+v, want %d deleted", tr.Table, tr, want[tr.Table])
			}
		}
		m := metrics(t, out.String())
		for label, n := range want {
			if m[sweepfn.MetricDeleted+" "+label] != float64(n) || m[sweepfn.MetricIncomplete+" "+label] != 0 {
				t.Fatalf("metrics %v, want %s deleted %d", m, label, n)
			}
		}
		if strings.Contains(logs.String(), "secret-key") || strings.Count(logs.String(), `"msg":"sweeper: swept"`) != 3 {
			t.Fatalf("logs:\n%s", logs.String())
		}
		if count(t, c, tb.effects) != 25-want[sweepfn.TableEffects] || count(t, c, tb.fence) != 13-want[sweepfn.TableFence] {
			t.Fatal("live items deleted, or expired items left")
		}
		out.mu.Lock()
		out.b.Reset()
		out.mu.Unlock()
		if rep, err := h.Handle(ctx, events.CloudWatchEvent{}); err != nil || rep.Tables[0].Deleted != 0 {
			t.Fatalf("second run: %+v %v", rep, err)
		}
		if m := metrics(t, out.String()); len(m) != 6 || m[sweepfn.MetricDeleted+" effects"] != 0 {
			t.Fatalf("second run metrics %v", m)
		}
	})
}

// A run stops before the Lambda deadline minus the margin, without error,
// reporting the tables it did not finish (incomplete_total 1); the next
// run, scanning from the start, finishes: the deleted counts of the two
// runs add up to the expired items exactly. The clock advances one second
// per reading, so the stop point is reached after a bounded number of
// calls, deterministically.
func TestStopsBeforeDeadlineAndNextRunResumes(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client()
		tb := newTables(t, e)
		now := time.Now()
		expired := seed(t, c, tb.effects, "EffectsTable", 60, now)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		dl, _ := ctx.Deadline()
		const margin = 30 * time.Second
		start := dl.Add(-margin - 20*time.Second) // 20 clock readings before the stop point
		var ticks atomic.Int64
		clock := func() time.Time { return start.Add(time.Duration(ticks.Add(1)-1) * time.Second) }
		var out syncBuf
		h := &sweepfn.Handler{Margin: margin, Now: clock, Metrics: emf.New(&out, ""),
			Targets: []sweepfn.Target{{Label: sweepfn.TableEffects,
				Sweeper: &sweeper.Sweeper{API: c, Table: tb.effects, KeyAttrs: []string{"pk", "sk"}, PageSize: 5, Concurrency: 1}}}}
		rep, err := h.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		first := rep.Tables[0]
		if first.Complete || first.Deleted == 0 || first.Deleted >= expired {
			t.Fatalf("first run %+v: want a partial sweep of %d", first, expired)
		}
		if !clock().After(dl.Add(-margin)) || ctx.Err() != nil {
			t.Fatal("the stop point was not reached, or the real deadline passed")
		}
		if m := metrics(t, out.String()); m[sweepfn.MetricIncomplete+" effects"] != 1 || m[sweepfn.MetricDeleted+" effects"] != float64(first.Deleted) {
			t.Fatalf("metrics %v", m)
		}
		h.Now = nil // real clock: the rest of the table fits in the budget
		rep, err = h.Sweep(ctx)
		if err != nil || !rep.Tables[0].Complete || first.Deleted+rep.Tables[0].Deleted != expired {
			t.Fatalf("second run %+v %v (first deleted %d of %d)", rep, err, first.Deleted, expired)
		}
		if count(t, c, tb.effects) != 60-expired {
			t.Fatal("wrong items left")
		}
	})
}

// A deadline already inside the margin sweeps nothing and issues no call.
func TestNoTimeLeft(t *testing.T) {
	cnt := dynamotest.NewCounter()
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1"}, cnt.Middleware())
	h := &sweepfn.Handler{Margin: time.Hour, Targets: []sweepfn.Target{{Label: sweepfn.TableEffects, Sweeper: &sweeper.Sweeper{API: c, Table: "t"}}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := h.Sweep(ctx)
	if err != nil || rep.Tables[0].Complete || cnt.Calls() != 0 {
		t.Fatalf("%+v %v, %d calls", rep, err, cnt.Calls())
	}
}

// An injected DynamoDB error on one table fails the run (the invocation
// counts as failed) with that table named, while the other tables are
// swept completely and every table's metrics are emitted; the next run
// completes the failed table.
func TestInjectedErrorFailsOneTableOnly(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client()
		f := dynamotest.NewFaults()
		faulty := e.Client(f.Middleware(), dynamotest.FastRetries, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
		tb := newTables(t, e)
		now := time.Now()
		ne := seed(t, c, tb.effects, "EffectsTable", 30, now)
		nf := seed(t, c, tb.fence, "FenceTable", 30, now)
		var out syncBuf
		h := &sweepfn.Handler{Metrics: emf.New(&out, ""), Targets: []sweepfn.Target{
			{Label: sweepfn.TableEffects, Sweeper: &sweeper.Sweeper{API: faulty, Table: tb.effects, KeyAttrs: []string{"pk", "sk"}, PageSize: 4, Concurrency: 1}},
			{Label: sweepfn.TableFence, Sweeper: &sweeper.Sweeper{API: c, Table: tb.fence}},
		}}
		f.FailNext("DeleteItem", 1, dynamotest.InternalServerError())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		rep, err := h.Sweep(ctx)
		if err == nil || !strings.Contains(err.Error(), "effects table") {
			t.Fatalf("error %v", err)
		}
		eff, fen := rep.Tables[0], rep.Tables[1]
		if eff.Complete || eff.Error == "" || !fen.Complete || fen.Deleted != nf {
			t.Fatalf("report %+v", rep)
		}
		m := metrics(t, out.String())
		// A failed run is the invocation's error (STACK-sweeper-errors),
		// not incomplete_total, which is 1 only for a first segment the
		// run's time did not cover (RED_TEAM 545); both are emitted.
		if v, ok := m[sweepfn.MetricIncomplete+" effects"]; !ok || v != 0 || m[sweepfn.MetricDeleted+" fence"] != float64(nf) || m[sweepfn.MetricDeleted+" effects"] != float64(eff.Deleted) {
			t.Fatalf("metrics %v", m)
		}
		rep, err = h.Sweep(ctx)
		if err != nil || !rep.Tables[0].Complete || eff.Deleted+rep.Tables[0].Deleted != ne {
			t.Fatalf("next run %+v %v", rep, err)
		}
	})
}

// NewFromEnv sweeps exactly the tables the environment names, with their
// keys; none is an error.
func TestNewFromEnv(t *testing.T) {
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	if _, err := sweepfn.NewFromEnv(settings.Env{}, c, nil, nil); err == nil {
		t.Fatal("no table accepted")
	}
	h, err := sweepfn.NewFromEnv(settings.Env{EffectsTable: "E"}, c, nil, nil)
	if err != nil || len(h.Targets) != 1 || h.Targets[0].Label != "effects" || strings.Join(h.Targets[0].Sweeper.KeyAttrs, ",") != "pk,sk" {
		t.Fatalf("%+v %v", h, err)
	}
	h, err = sweepfn.NewFromEnv(settings.Env{EffectsTable: "E", FenceTable: "F", FenceTableRegion: "eu-west-1", Idem: idemenv.Env{Table: "I"}}, c, nil, nil)
	if err != nil || len(h.Targets) != 3 || h.Targets[1].Sweeper.Table != "F" || h.Targets[2].Label != "idempotency" {
		t.Fatalf("%+v %v", h, err)
	}
	if fc := h.Targets[1].Sweeper.API.(*dynamodb.Client); fc.Options().Region != "eu-west-1" {
		t.Fatalf("fence swept in %s, want its home region", fc.Options().Region)
	}
	// Each table is swept in rotating segments, so a table too large for
	// one run is still swept to its end within Segments hourly runs.
	for _, tg := range h.Targets {
		if tg.Sweeper.Segments != sweepfn.Segments {
			t.Fatalf("%s: %d segments, want %d", tg.Label, tg.Sweeper.Segments, sweepfn.Segments)
		}
	}
	dup := &sweepfn.Handler{Targets: []sweepfn.Target{h.Targets[0], h.Targets[0]}}
	if dup.Validate() == nil {
		t.Fatal("duplicate table accepted")
	}
}

// Under a policy that keeps Layer-1 records forever the sweeper refuses
// the idempotency table (naming the variable and the policy) instead of
// deleting anything there; a finite retention under the same policy is
// swept as before.
func TestNewFromEnvRefusesForeverRetention(t *testing.T) {
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	for _, vars := range []map[string]string{
		{idemenv.Table: "I", idemenv.Policy: "commerce"},
		{idemenv.Table: "I", idemenv.RetentionHours: "forever"},
		{idemenv.Table: "I", idemenv.Policy: "erp", idemenv.RetentionHours: "0"},
	} {
		env, err := settings.LoadEnv(settings.Values(vars))
		if err != nil {
			t.Fatal(err)
		}
		h, err := sweepfn.NewFromEnv(env, c, nil, nil)
		if err == nil || !strings.Contains(err.Error(), idemenv.Table) || !strings.Contains(err.Error(), env.Idem.PolicyName()) {
			t.Fatalf("%v: %+v %v", vars, h, err)
		}
	}
	env, err := settings.LoadEnv(settings.Values(map[string]string{idemenv.Table: "I", idemenv.Policy: "commerce", idemenv.RetentionHours: "48"}))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := sweepfn.NewFromEnv(env, c, nil, nil); err != nil || len(h.Targets) != 1 || h.Targets[0].Label != "idempotency" {
		t.Fatalf("commerce with 48 h: %+v %v", h, err)
	}
}

// Wired from the environment the template gives the sweeper of a
// fenced-effects home stack without EffectsConsistency STRONG
// (IDEMPOTENCY_TABLE with the api function's policy and retention, no
// EFFECTS_TABLE), a run sweeps the idempotency table only: the expired
// items of the effects and fence tables stay (TTL deletes those there),
// and metrics and logs name the idempotency table alone.
func TestSweepsOnlyTheConfiguredTables(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client()
		tb := newTables(t, e)
		now := time.Now()
		ne, nf := seed(t, c, tb.effects, "EffectsTable", 12, now), seed(t, c, tb.fence, "FenceTable", 9, now)
		ni := seed(t, c, tb.idem, "IdempotencyTable", 15, now)
		env, err := settings.LoadEnv(settings.Values(map[string]string{idemenv.Table: tb.idem, idemenv.Policy: "openwop", idemenv.RetentionHours: ""}))
		if err != nil {
			t.Fatal(err)
		}
		var out, logs syncBuf
		h, err := sweepfn.NewFromEnv(env, c, emf.New(&out, "idemkit"), slog.New(slog.NewJSONHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := h.Handle(context.Background(), events.CloudWatchEvent{})
		if err != nil || len(rep.Tables) != 1 || rep.Tables[0].Table != sweepfn.TableIdempotency || rep.Tables[0].Deleted != ni || !rep.Tables[0].Complete {
			t.Fatalf("%+v %v, want the idempotency table alone, %d deleted", rep, err, ni)
		}
		if count(t, c, tb.idem) != 15-ni || count(t, c, tb.effects) != 12 || count(t, c, tb.fence) != 9 || ne == 0 || nf == 0 {
			t.Fatal("a table not configured was swept, or the idempotency table was not")
		}
		m := metrics(t, out.String())
		if len(m) != 2 || m[sweepfn.MetricDeleted+" idempotency"] != float64(ni) || m[sweepfn.MetricIncomplete+" idempotency"] != 0 {
			t.Fatalf("metrics %v", m)
		}
		if strings.Count(logs.String(), `"table":"idempotency"`) != 1 || strings.Contains(logs.String(), `"table":"effects"`) || strings.Contains(logs.String(), "secret-key") {
			t.Fatalf("logs:\n%s", logs.String())
		}
	})
}
