package execfn

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestNewRunRoundTrips: the executor starts a run its INSERT record
// announces with the compare-and-set pending -> running alone (the record's
// image already says what a read would), so a run without effects costs the
// runs table exactly its two transitions: two UpdateItems, no GetItem. A
// duplicate delivery of a finished run writes nothing (its failed
// compare-and-set returns the stored run, which is left as it was); a
// delivery that finds the run already running (another delivery started it)
// resumes it to completion; a run that no longer exists is skipped.
func TestNewRunRoundTrips(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		cnt := dynamotest.NewCounter()
		c := e.Client(dynamotest.FastRetries, cnt.Middleware())
		tbl := e.CreateTable(t, "RunsTable")
		store := &runs.DynamoRuns{Client: c, Table: tbl}
		x := &Executor{Runs: store, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
		// record is the INSERT record of a new run: its image is the item
		// as Create stored it.
		record := func(t *testing.T, r runs.Run) stream.StreamRecord {
			t.Helper()
			if err := store.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
			out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: r.ID}}})
			if err != nil || out.Item == nil {
				t.Fatalf("read the new run: %v", err)
			}
			return stream.StreamRecord{EventID: "ev-" + r.ID, EventName: "INSERT", NewImage: out.Item}
		}
		get := func(t *testing.T, id string) runs.Run {
			t.Helper()
			r, err := store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}

		r := runs.NewRun("acme", "conformance-noop", nil, time.Now())
		rec := record(t, r)
		cnt.Reset()
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{rec}); len(retry) != 0 {
			t.Fatalf("retry %v", retry)
		}
		if n, ops := cnt.Total(), cnt.Ops(); n != 2 || ops["UpdateItem"] != 2 {
			t.Fatalf("a new run took %d round trips (%v), want its two transitions (2 UpdateItem)", n, ops)
		}
		done := get(t, r.ID)
		if done.Status != runs.StatusCompleted || done.Version != 3 {
			t.Fatalf("run %s at version %d, want completed at 3 (pending, running, completed)", done.Status, done.Version)
		}

		// A duplicate delivery of the finished run: nothing written.
		cnt.Reset()
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{rec}); len(retry) != 0 {
			t.Fatalf("duplicate: retry %v", retry)
		}
		if n := cnt.Total(); n > 2 {
			t.Fatalf("a duplicate delivery took %d round trips (%v)", n, cnt.Ops())
		}
		if again := get(t, r.ID); again.Version != done.Version || !again.UpdatedAt.Equal(done.UpdatedAt) {
			t.Fatalf("a duplicate delivery changed the run: %+v", again)
		}

		// Another delivery started the run: this one resumes it.
		r2 := runs.NewRun("acme", "conformance-noop", nil, time.Now())
		rec2 := record(t, r2)
		if _, err := store.Transition(ctx, r2.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{rec2}); len(retry) != 0 {
			t.Fatalf("running: retry %v", retry)
		}
		if got := get(t, r2.ID); got.Status != runs.StatusCompleted {
			t.Fatalf("a running run's delivery left it %s", got.Status)
		}

		// A cancelled run is skipped.
		r3 := runs.NewRun("acme", "conformance-noop", nil, time.Now())
		rec3 := record(t, r3)
		if _, err := store.Transition(ctx, r3.ID, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{rec3}); len(retry) != 0 {
			t.Fatalf("cancelled: retry %v", retry)
		}
		if got := get(t, r3.ID); got.Status != runs.StatusCancelled {
			t.Fatalf("a cancelled run's delivery left it %s", got.Status)
		}

		// A run that no longer exists (past retention) is skipped.
		gone := rec3
		gone.EventID = "ev-gone"
		gone.NewImage = map[string]types.AttributeValue{}
		for k, v := range rec3.NewImage {
			gone.NewImage[k] = v
		}
		gone.NewImage["pk"] = &types.AttributeValueMemberS{Value: runs.NewRunID("acme")}
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{gone}); len(retry) != 0 {
			t.Fatalf("missing run: retry %v", retry)
		}
	})
}

// TestGraphRunRoundTrips: a run with a node graph costs the runs table its
// two transitions plus one UpdateItem per node event (AppendLog: each
// node.started and node.completed is one conditional write, no read), and
// the effects table the ledger's own round trips per side-effecting
// execution. A replay fork of it costs the runs table the same, and the
// effects table exactly one GetItem per side-effecting execution
// (ledger.Ledger.Replay: one consistent read, no write).
func TestGraphRunRoundTrips(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		runsCnt, fxCnt := dynamotest.NewCounter(), dynamotest.NewCounter()
		rc := e.Client(dynamotest.FastRetries, runsCnt.Middleware())
		tbl := e.CreateTable(t, "RunsTable")
		store := &runs.DynamoRuns{Client: rc, Table: tbl}
		st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: e.Client(dynamotest.FastRetries, fxCnt.Middleware()), Table: e.CreateTable(t, "EffectsTable")})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.New(ledger.Config{Store: st, Wait: -1})
		if err != nil {
			t.Fatal(err)
		}
		recv := newReceiver(t)
		x := &Executor{Runs: store, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			Webhook:    &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
			FixtureURL: recv.srv.URL + "/fixture",
			Test:       TestConfig{Clock: ledgertest.ClockFuncs{SleepFunc: func(context.Context, time.Duration) error { return nil }}}}
		record := func(t *testing.T, r runs.Run) stream.StreamRecord {
			t.Helper()
			if err := store.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
			out, err := rc.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: r.ID}}})
			if err != nil || out.Item == nil {
				t.Fatalf("read the new run: %v", err)
			}
			return stream.StreamRecord{EventID: "ev-" + r.ID, EventName: "INSERT", NewImage: out.Item}
		}
		// The looped fixture: start, effect, wait, effect, wait: 5
		// executions, 10 node events, 2 side-effecting executions.
		const nodeEvents, effects = 10, 2
		// effectTrips is what one side-effecting execution costs the
		// effects table: the ledger's claim and its completion, two PutItem.
		const effectTrips = 2
		// run executes r from its INSERT record and returns it with the
		// round trips of that execution (runs table, effects table).
		type trips struct {
			n   int
			ops map[string]int
		}
		var runsTrips, fxTrips trips
		run := func(t *testing.T, r runs.Run) runs.Run {
			t.Helper()
			rec := record(t, r)
			runsCnt.Reset()
			fxCnt.Reset()
			if retry := x.HandleRecords(ctx, []stream.StreamRecord{rec}); len(retry) != 0 {
				t.Fatalf("retry %v", retry)
			}
			runsTrips, fxTrips = trips{runsCnt.Total(), runsCnt.Ops()}, trips{fxCnt.Total(), fxCnt.Ops()}
			got, err := store.Get(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		src := run(t, runs.NewRun("acme", webhook.WorkflowReplayOrdinalLoop, json.RawMessage(`{"delayMs":1}`), time.Now()))
		if src.Status != runs.StatusCompleted || len(src.Log) != nodeEvents {
			t.Fatalf("source %s with %d node events", src.Status, len(src.Log))
		}
		if n, ops := runsTrips.n, runsTrips.ops; n != 2+nodeEvents || ops["UpdateItem"] != 2+nodeEvents {
			t.Fatalf("the runs table: %d round trips (%v), want 2 transitions + %d node events, all UpdateItem", n, ops, nodeEvents)
		}
		if n, ops := fxTrips.n, fxTrips.ops; n != effectTrips*effects || ops["PutItem"] != n {
			t.Fatalf("the effects table: %d round trips (%v) for %d effects, want %d each", n, ops, effects, effectTrips)
		}

		rep := runs.NewFork(src, runs.ForkReplay, 0, nil, time.Now())
		rep = run(t, rep)
		if rep.Status != runs.StatusCompleted || len(rep.Log) != nodeEvents {
			t.Fatalf("replay fork %s (%s) with %d node events", rep.Status, rep.Error, len(rep.Log))
		}
		if n, ops := runsTrips.n, runsTrips.ops; n != 2+nodeEvents || ops["UpdateItem"] != 2+nodeEvents {
			t.Fatalf("replay fork, the runs table: %d round trips (%v), want %d UpdateItem", n, ops, 2+nodeEvents)
		}
		if n, ops := fxTrips.n, fxTrips.ops; n != effects || ops["GetItem"] != effects {
			t.Fatalf("replay fork, the effects table: %d round trips (%v), want %d GetItem (one read per execution, no write)", n, ops, effects)
		}

		// The run's caps (configurable.run) are checked in memory: a run
		// within them costs what a run without them does; one ended on a
		// breach writes the breach (RunStore.Breach, one UpdateItem) where
		// the completion would have been, and nothing for the nodes it
		// did not start.
		capped := func(conf string, created time.Time) runs.Run {
			r := runs.NewRun("acme", webhook.WorkflowReplayOrdinalLoop, json.RawMessage(`{"delayMs":1}`), created)
			r.Options.Configurable = json.RawMessage(conf)
			return run(t, r)
		}
		within := capped(`{"version":1,"run":{"runTimeoutMs":3600000,"maxLoopIterations":2}}`, time.Now())
		if within.Status != runs.StatusCompleted || runsTrips.n != 2+nodeEvents || runsTrips.ops["UpdateItem"] != 2+nodeEvents ||
			fxTrips.n != effectTrips*effects {
			t.Fatalf("a run within its caps: %s, the runs table %v, the effects table %v; want what a run without caps costs", within.Status, runsTrips.ops, fxTrips.ops)
		}
		// maxLoopIterations 1: start, effect, wait (6 node events), then
		// the breach before the second entry of the loop.
		looped := capped(`{"version":1,"run":{"maxLoopIterations":1}}`, time.Now())
		if looped.Status != runs.StatusFailed || runsTrips.n != 1+6+1 || runsTrips.ops["UpdateItem"] != 8 || fxTrips.n != effectTrips {
			t.Fatalf("a loop-limited run: %s, the runs table %v, the effects table %v; want the start, 6 node events and the breach (8 UpdateItem), one effect", looped.Status, runsTrips.ops, fxTrips.ops)
		}
		// Past its deadline when its INSERT comes: the start and the breach.
		late := capped(`{"version":1,"run":{"runTimeoutMs":1}}`, time.Now().Add(-time.Hour))
		if late.Status != runs.StatusFailed || runsTrips.n != 2 || runsTrips.ops["UpdateItem"] != 2 || fxTrips.n != 0 {
			t.Fatalf("a run past its deadline: %s, the runs table %v, the effects table %v; want 2 UpdateItem, nothing else", late.Status, runsTrips.ops, fxTrips.ops)
		}
	})
}
