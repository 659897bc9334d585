package runs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/stream/mapping"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// executorFilter is the executor's RunsStream filter as template.yaml
// declares it (the deployed mapping's, and `idemkit dev`'s).
func executorFilter(t *testing.T) stream.Filter {
	t.Helper()
	f, err := mapping.RunsStream()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// tableRecords returns the records of table's stream (every shard from
// its trim horizon), or, on an engine without streams, each item of the
// table as the INSERT record of its image now (what the table holds after
// the writes: the attributes an INSERT image carries are there still).
func tableRecords(ctx context.Context, t *testing.T, e *dynamotest.Emulator, c *dynamodb.Client, table string) []stream.StreamRecord {
	t.Helper()
	var recs []stream.StreamRecord
	if !e.Caps.Streams {
		out, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			recs = append(recs, stream.StreamRecord{EventName: "INSERT", Keys: map[string]types.AttributeValue{runAttrPK: it[runAttrPK]}, NewImage: it})
		}
		return recs
	}
	desc, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	sc := e.StreamsClient()
	sd, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: desc.Table.LatestStreamArn})
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range sd.StreamDescription.Shards {
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: desc.Table.LatestStreamArn,
			ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		for iter := it.ShardIterator; iter != nil; {
			out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: iter})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range out.Records {
				sr, err := stream.FromStreams(r)
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, sr)
			}
			if len(out.Records) == 0 {
				break // an open shard: everything written so far was read
			}
			iter = out.NextShardIterator
		}
	}
	return recs
}

// TestExecutorStreamFilterHandsOverNewRunsOnly: the executor's mapping on
// RunsTable's stream invokes it for the INSERT of a new run, by every path
// that creates one (createRun, an enforced createRun of a free scope and
// one taking a scope over, a retry, a fork, on a conditional and a
// transactional store: each writes its run with runItem), and for nothing
// else the runs table holds: a scope item (`OpenWOP-Dedup: enforce`), a
// takeover's tombstone, a tenant's inbox, a run's later writes (MODIFY)
// and deletions (REMOVE). Each of those, handed over, is a paid invocation
// the executor ignores. The filter's verdict is derived from template.yaml's
// pattern evaluated on the records the store's writes put on the stream
// (on an engine without streams, on the items), and must agree with
// RunFromItem, the executor's own reading of an INSERT image.
func TestExecutorStreamFilterHandsOverNewRunsOnly(t *testing.T) {
	filter := executorFilter(t)
	forEachWriteMode(t, func(t *testing.T, e *dynamotest.Emulator, transactional bool) {
		ctx := context.Background()
		c := e.Client(dynamotest.FastRetries)
		d := &DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable"), Transactional: transactional}
		t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
		created := map[string]string{} // run id -> path
		mustCreate := func(path string, r Run, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			created[r.ID] = path
		}

		plain := scopeTestRun(t0)
		plain.Options = Options{Tags: json.RawMessage(`["a"]`), Metadata: json.RawMessage(`{"k":"v"}`)}
		mustCreate("createRun", plain, d.Create(ctx, plain))
		scoped := scopeTestRun(t0)
		mustCreate("enforced createRun", scoped, d.CreateScoped(ctx, scoped, "free"))
		// A scope held by a create that stopped before its run
		// write: the takeover fences it with a tombstone.
		stopped := scopeTestRun(t0)
		if err := d.acquireScope(ctx, scopeKey("acme", "taken"), stopped); err != nil {
			t.Fatal(err)
		}
		taker := scopeTestRun(t0.Add(ScopeHoldGrace + time.Second))
		mustCreate("enforced createRun taking a scope over", taker, d.CreateScoped(ctx, taker, "taken"))
		// A failed run, retried; a fork of it.
		failed := scopeTestRun(t0)
		mustCreate("createRun (to fail)", failed, d.Create(ctx, failed))
		if _, err := d.Transition(ctx, failed.ID, []Status{StatusPending}, StatusFailed, "boom", t0.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		src, err := d.Get(ctx, failed.ID)
		if err != nil {
			t.Fatal(err)
		}
		retry := NewRun(src.Tenant, src.WorkflowID, src.Inputs, t0.Add(2*time.Second))
		retry.RetryOf, retry.Options = src.ID, src.Options
		mustCreate("retry", retry, d.Create(ctx, retry))
		fork := NewFork(src, ForkBranch, 0, nil, t0.Add(3*time.Second))
		mustCreate("fork", fork, d.Create(ctx, fork))
		replay := NewFork(src, ForkReplay, 0, nil, t0.Add(3*time.Second))
		mustCreate("replay", replay, d.Create(ctx, replay))
		// A tenant's inbox, in the same table.
		ib, err := inbox.NewDynamo(inbox.DynamoConfig{Client: c, Table: d.Table})
		if err != nil {
			t.Fatal(err)
		}
		if err := ib.Keep(ctx, inbox.Entry{ID: "AAAAAAAAAAAAAAAAAAAAAA", Tenant: "acme", Operation: "cancelRun", RecordID: plain.ID,
			DecidedVersion: 1, CurrentVersion: 2, CreatedAt: t0}, ""); err != nil {
			t.Fatal(err)
		}

		kinds := map[string]int{}
		handed := map[string]bool{}
		for _, rec := range tableRecords(ctx, t, e, c, d.Table) {
			pk := rec.Keys[runAttrPK].(*types.AttributeValueMemberS).Value
			img := rec.NewImage
			if img == nil {
				img = rec.OldImage
			}
			kind := rec.EventName + " of a run"
			_, isRun := RunFromItem(img)
			switch _, tomb := img[runAttrTakenOver]; {
			case tomb:
				kind = rec.EventName + " of a tombstone"
			case len(pk) > len("#scope/") && pk[:len("#scope/")] == "#scope/":
				kind = rec.EventName + " of a scope item"
			case len(pk) > len("#inbox/") && pk[:len("#inbox/")] == "#inbox/":
				kind = rec.EventName + " of an inbox"
			case !isRun:
				t.Fatalf("an item of no known kind: %v", img)
			}
			kinds[kind]++
			want := rec.EventName == "INSERT" && isRun
			if got := filter.Match(rec); got != want {
				t.Errorf("%s %s: the executor's filter hands it over: %v, want %v", kind, pk, got, want)
			}
			if want {
				handed[pk] = true
			}
		}
		for id, path := range created {
			if !handed[id] {
				t.Errorf("the run created by %s (%s) is not handed to the executor", path, id)
			}
		}
		for _, k := range []string{"INSERT of a run", "INSERT of a scope item", "INSERT of a tombstone", "INSERT of an inbox"} {
			if kinds[k] == 0 {
				t.Errorf("no %s was written: the test proves nothing about it (%v)", k, kinds)
			}
		}
		if e.Caps.Streams && kinds["MODIFY of a run"] == 0 {
			t.Errorf("no run was modified: %v", kinds)
		}
		t.Logf("records: %v", kinds)
	})
}

// TestExecutorStreamFilterHandsOverResumes: of a run's later writes
// (MODIFY), the executor's mapping hands over exactly its resume (the
// change from paused to running, Unpause), once per resume: never the
// pause, a drained node's end, a renewal, a node event, the stale-run
// pass's release of a held run.paused, nor a cancel of the paused run.
// On the engines with streams.
func TestExecutorStreamFilterHandsOverResumes(t *testing.T) {
	filter := executorFilter(t)
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		c := e.Client(dynamotest.FastRetries)
		d := &DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
		t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
		r := scopeTestRun(t0)
		if err := d.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		run, err := d.Transition(ctx, r.ID, []Status{StatusPending}, StatusRunning, "", t0)
		must := func(_ Run, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(run, err)
		run, err = d.AppendLog(ctx, r.ID, run.Fence(), []LogEvent{{Type: EventNodeStarted, NodeID: "a", At: t0, Payload: json.RawMessage(`{}`)}}, t0)
		must(run, err)
		must(d.Pause(ctx, r.ID, Pause{By: "p1"}, t0))
		must(d.Renew(ctx, r.ID, run.Epoch, t0))
		must(d.AppendLog(ctx, r.ID, run.Fence(), []LogEvent{{Type: EventNodeCompleted, NodeID: "a", At: t0, Payload: json.RawMessage(`{}`)}}, t0))
		must(d.Unpause(ctx, r.ID, "r1", "", t0))
		must(d.Adopt(ctx, r.ID, t0))
		must(d.Pause(ctx, r.ID, Pause{Drain: DrainImmediate, By: "p2"}, t0))
		must(d.Unpause(ctx, r.ID, "r2", "", t0))
		// A drain whose execution stopped: the stale-run pass's release
		// of its held run.paused keeps the run paused (RED_TEAM 388).
		run, err = d.Adopt(ctx, r.ID, t0)
		must(run, err)
		run, err = d.AppendLog(ctx, r.ID, run.Fence(), []LogEvent{{Type: EventNodeStarted, NodeID: "b", At: t0, Payload: json.RawMessage(`{}`)}}, t0)
		must(run, err)
		held, err := d.Pause(ctx, r.ID, Pause{By: "p4"}, t0)
		must(held, err)
		must(d.ReleaseStalePause(ctx, held, t0, t0))
		must(d.Unpause(ctx, r.ID, "r4", "", t0))
		must(d.Pause(ctx, r.ID, Pause{By: "p3"}, t0))
		must(d.Cancel(ctx, r.ID, []Status{StatusPaused}, "c1", "", t0))
		resumes := 0
		for _, rec := range tableRecords(ctx, t, e, c, d.Table) {
			was, _ := RunFromItem(rec.OldImage)
			is, isRun := RunFromItem(rec.NewImage)
			resume := rec.EventName == "MODIFY" && was.Status == StatusPaused && is.Status == StatusRunning
			want := rec.EventName == "INSERT" && isRun || resume
			if got := filter.Match(rec); got != want {
				t.Errorf("%s %s -> %s: the executor's filter hands it over: %v, want %v", rec.EventName, was.Status, is.Status, got, want)
			}
			if resume && filter.Match(rec) {
				resumes++
			}
		}
		if resumes != 3 {
			t.Errorf("%d resumes handed over, want 3", resumes)
		}
	})
}
