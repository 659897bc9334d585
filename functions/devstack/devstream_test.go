package devstack

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
)

// TestPollerResumesFromCheckpoint: the dev stream poller keeps a checkpoint
// per shard; a poller started again on the same stream and checkpoints (a
// restarted `idemkit dev`) is handed only the records written since, not
// the stream from its start. Without checkpoints every record comes again.
func TestPollerResumesFromCheckpoint(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c := e.Client()
		table := e.CreateTable(t, "RunsTable")
		arn, err := tables.StreamARN(ctx, c, table)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := newDynamoCheckpoints(ctx, c, e.CreateTable(t, "FenceTable")+"-cp")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(cp.table)})
		})
		put := func(pk string) {
			if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table),
				Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}}); err != nil {
				t.Fatal(err)
			}
		}
		// runUntil polls with a fresh poller until it has been handed
		// every key of want, then stops it; it returns every key handed.
		runUntil := func(cps checkpoints, want ...string) []string {
			var mu sync.Mutex
			seen := map[string]int{}
			var got []string
			p := &poller{name: "runs", sc: e.StreamsClient(), arn: arn, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				interval: 20 * time.Millisecond, cp: cps,
				handle: func(_ context.Context, recs []stream.StreamRecord) []string {
					mu.Lock()
					defer mu.Unlock()
					for _, r := range recs {
						if v, ok := r.Keys["pk"].(*types.AttributeValueMemberS); ok {
							seen[v.Value]++
							got = append(got, v.Value)
						}
					}
					return nil
				}}
			pctx, pcancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); p.run(pctx) }()
			defer func() { pcancel(); <-done }()
			for {
				mu.Lock()
				all := true
				for _, k := range want {
					all = all && seen[k] > 0
				}
				mu.Unlock()
				if all {
					// Give a re-read of older records time to show.
					time.Sleep(500 * time.Millisecond)
					mu.Lock()
					defer mu.Unlock()
					out := append([]string(nil), got...)
					sort.Strings(out)
					return out
				}
				select {
				case <-ctx.Done():
					t.Fatalf("poller was handed %v, want %v", got, want)
				case <-time.After(20 * time.Millisecond):
				}
			}
		}

		put("a")
		put("b")
		if got := runUntil(cp, "a", "b"); len(got) != 2 {
			t.Fatalf("first start handed %v", got)
		}
		put("c")
		if got := runUntil(cp, "c"); len(got) != 1 || got[0] != "c" {
			t.Fatalf("restart with checkpoints handed %v; want only the new record c", got)
		}
		if got := runUntil(nil, "a", "b", "c"); len(got) != 3 {
			t.Fatalf("without checkpoints: handed %v, want the whole stream", got)
		}
	})
}

// TestPollerWakesWhenKicked: an idle poller backs off (here to an hour, far
// past the test's deadline), yet a wake-up — what `idemkit dev` sends after
// every write of the stack to the poller's table — has it poll at once and
// hand over the new record.
func TestPollerWakesWhenKicked(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c := e.Client()
		table := e.CreateTable(t, "RunsTable")
		arn, err := tables.StreamARN(ctx, c, table)
		if err != nil {
			t.Fatal(err)
		}
		put := func(pk string) {
			if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table),
				Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}}); err != nil {
				t.Fatal(err)
			}
		}
		handed := make(chan string, 16)
		w := newWaker(1)
		p := &poller{name: "runs", sc: e.StreamsClient(), arn: arn, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			interval: time.Hour, idleMax: time.Hour, wake: w[0],
			handle: func(_ context.Context, recs []stream.StreamRecord) []string {
				for _, r := range recs {
					if v, ok := r.Keys["pk"].(*types.AttributeValueMemberS); ok {
						handed <- v.Value
					}
				}
				return nil
			}}
		expect := func(want string) {
			t.Helper()
			select {
			case got := <-handed:
				if got != want {
					t.Fatalf("handed %q, want %q", got, want)
				}
			case <-ctx.Done():
				t.Fatalf("record %q never handed over", want)
			}
		}
		put("a") // before the start: the first poll finds it
		pctx, pcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); p.run(pctx) }()
		defer func() { pcancel(); <-done }()
		expect("a")
		put("b") // the poller is idle now, its next timed poll an hour away
		w.kick()
		expect("b")
	})
}
