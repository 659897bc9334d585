package devstack

import (
	"context"
	"log/slog"
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

// memCheckpoints keeps checkpoints in memory and counts the puts.
type memCheckpoints struct {
	mu   sync.Mutex
	seq  map[string]string
	puts int
}

func newMemCheckpoints() *memCheckpoints { return &memCheckpoints{seq: map[string]string{}} }

func (m *memCheckpoints) get(_ context.Context, stream, shard string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seq[stream+"#"+shard], nil
}

func (m *memCheckpoints) put(_ context.Context, stream, shard, seq string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq[stream+"#"+shard] = seq
	m.puts++
	return nil
}

// retryClock is a manual clock whose sleep advances it at once (after a
// millisecond of real time).
type retryClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *retryClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *retryClock) sleep(_ context.Context, d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	time.Sleep(time.Millisecond) // let the test look between tries
}

// pollerRig is a runs-like table with a stream and a poller over it whose
// handler the test decides per key.
type pollerRig struct {
	t   *testing.T
	e   *dynamotest.Emulator
	ctx context.Context
	arn string
	tbl string
}

func newPollerRig(t *testing.T, e *dynamotest.Emulator) *pollerRig {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	tbl := e.CreateTable(t, "RunsTable")
	arn, err := tables.StreamARN(ctx, e.Client(), tbl)
	if err != nil {
		t.Fatal(err)
	}
	return &pollerRig{t: t, e: e, ctx: ctx, arn: arn, tbl: tbl}
}

func (r *pollerRig) put(pk string) {
	r.t.Helper()
	if _, err := r.e.Client().PutItem(r.ctx, &dynamodb.PutItemInput{TableName: aws.String(r.tbl),
		Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}}); err != nil {
		r.t.Fatal(err)
	}
}

// run starts a poller with handle (given each record's key; false: fail
// it and everything after it) until stop is called.
func (r *pollerRig) run(cp checkpoints, clk *retryClock, retryFor time.Duration, handle func(pk string) bool) (stop func()) {
	p := &poller{name: "runs", sc: r.e.StreamsClient(), arn: r.arn, log: slog.New(slog.NewTextHandler(testWriter{r.t}, nil)),
		interval: 5 * time.Millisecond, idleMax: 50 * time.Millisecond, cp: cp, retryFor: retryFor, now: clk.now, sleep: clk.sleep,
		handle: func(_ context.Context, recs []stream.StreamRecord) []string {
			for i, rec := range recs {
				pk := rec.Keys["pk"].(*types.AttributeValueMemberS).Value
				if !handle(pk) {
					var retry []string
					for _, rest := range recs[i:] {
						retry = append(retry, rest.EventID)
					}
					return retry
				}
			}
			return nil
		}}
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	return func() { cancel(); <-done }
}

// await polls cond until it holds or the rig's deadline passes.
func (r *pollerRig) await(what string, cond func() bool) {
	r.t.Helper()
	for !cond() {
		select {
		case <-r.ctx.Done():
			r.t.Fatalf("never: %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestStreamRetriesAreBoundedByTimeNotCount: a record whose handler fails
// many more times than any small retry count (here 12 failures, where an
// event source mapping's count would have dropped it after 5) is retried
// with backoff until it is handled, because its retry time (a minute) has
// not run out; a record that keeps failing is dropped only once it has
// been failing for the whole retry time, whatever the number of tries,
// and the record behind it (in the same batch or not) is handed over.
func TestStreamRetriesAreBoundedByTimeNotCount(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		r := newPollerRig(t, e)
		clk := &retryClock{t: time.Unix(1_700_000_000, 0)}
		var mu sync.Mutex
		tries := map[string]int{}
		handled := map[string]bool{}
		var droppedAt time.Duration
		start := clk.now()
		cp := newMemCheckpoints()
		stop := r.run(cp, clk, time.Minute, func(pk string) bool {
			mu.Lock()
			defer mu.Unlock()
			tries[pk]++
			switch {
			case pk == "flaky" && tries[pk] <= 12:
				return false
			case pk == "broken":
				droppedAt = clk.now().Sub(start)
				return false
			}
			handled[pk] = true
			return true
		})
		defer stop()
		r.put("flaky")
		r.await("the flaky record handled", func() bool { mu.Lock(); defer mu.Unlock(); return handled["flaky"] })
		mu.Lock()
		if tries["flaky"] != 13 {
			t.Errorf("flaky record tried %d times, want 13 (12 failures, then handled)", tries["flaky"])
		}
		start = clk.now()
		mu.Unlock()

		// A record that never succeeds is dropped after the retry time:
		// the record after it is then handed over.
		r.put("broken")
		r.put("after")
		r.await("the record after the broken one handled", func() bool { mu.Lock(); defer mu.Unlock(); return handled["after"] })
		mu.Lock()
		defer mu.Unlock()
		if droppedAt < time.Minute-5*time.Second {
			t.Errorf("broken record's last try at %s of retry time, want it retried for about the whole minute", droppedAt)
		}
		if tries["broken"] <= 5+1 { // dev's STREAM_MAX_RETRIES default
			t.Errorf("broken record tried %d times: bounded by a count, not by time", tries["broken"])
		}
	})
}

// TestCheckpointNeverPassesAnUnprocessedRecord: while a record fails (far
// more often than a small retry count) the poller's checkpoint stays
// before it, so a poller restarted on the same checkpoints (a restarted
// `idemkit dev`) is handed that record again, and the records before it,
// handled, are not handed again.
func TestCheckpointNeverPassesAnUnprocessedRecord(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		r := newPollerRig(t, e)
		clk := &retryClock{t: time.Unix(1_700_000_000, 0)}
		cp := newMemCheckpoints()
		var mu sync.Mutex
		tries := map[string]int{}
		stop := r.run(cp, clk, 1000*time.Hour, func(pk string) bool {
			mu.Lock()
			defer mu.Unlock()
			tries[pk]++
			return pk != "stuck"
		})
		r.put("first")
		r.await("the first record handled", func() bool { mu.Lock(); defer mu.Unlock(); return tries["first"] > 0 })
		r.put("stuck")
		r.put("later")
		r.await("the stuck record tried 20 times", func() bool { mu.Lock(); defer mu.Unlock(); return tries["stuck"] >= 20 })
		stop()
		mu.Lock()
		if tries["later"] != 0 {
			t.Errorf("the record after the stuck one was handed %d times before the stuck one succeeded", tries["later"])
		}
		mu.Unlock()

		// The restart: the stuck record and the one after it come again,
		// the handled first record does not.
		again := map[string]int{}
		stop = r.run(cp, clk, 1000*time.Hour, func(pk string) bool {
			mu.Lock()
			defer mu.Unlock()
			again[pk]++
			return true
		})
		defer stop()
		r.await("the restarted poller handed the stuck and later records", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return again["stuck"] > 0 && again["later"] > 0
		})
		mu.Lock()
		defer mu.Unlock()
		if again["first"] != 0 {
			t.Errorf("the restarted poller handed the handled first record again: checkpoint not kept")
		}
	})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }
