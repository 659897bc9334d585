package auditfn

import (
	"context"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// TestAuditRealStream drives the real ledger through an escaped attempt
// and a crash-then-reclaim, reads the effects table's stream with the
// dynamodbstreams client (as `idemkit dev` does) and audits it, on every
// engine with streams.
func TestAuditRealStream(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, testAuditRealStream)
}

func testAuditRealStream(t *testing.T, e *dynamotest.Emulator) {
	ctx := context.Background()
	c := e.Client()
	table := e.CreateTable(t, "EffectsTable")
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: c, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: st, Lease: time.Minute, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clock}}, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	runID := runs.NewRunID("acme")
	id, _ := identity.FromActivity(identity.Activity{Tenant: "acme", RunID: runID, NodeID: "n", Provider: "p"})
	eff := ledger.Effect{Identity: id, RunID: runID, NodeID: "n"}
	// 1: the provider call's outcome is unknown -> escaped.
	if _, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("timeout"))
	}); !errors.Is(err, ledger.ErrUncertain) {
		t.Fatal(err)
	}
	// 2: the executor dies after the fire mark.
	func() {
		defer func() { _ = recover() }()
		_, _ = l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) { panic("crash") })
	}()
	// 3: after the lease, the next executor reclaims and completes.
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if _, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) { return []byte("ok"), nil }); err != nil {
		t.Fatal(err)
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
	var recs []stream.StreamRecord
	for _, sh := range sd.StreamDescription.Shards {
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: desc.Table.LatestStreamArn,
			ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
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
	}
	a := &Auditor{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	got := a.Audit(ctx, recs)
	if got.Escaped[TableEffects] != 2 || got.Reclaims[TableEffects] != 1 {
		t.Fatalf("%d stream records: %+v", len(recs), got)
	}
}
