package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// insert writes run pk's n-th record to the rig's stream: a new item
// (INSERT) the first time, else the item deleted (REMOVE, which the runs
// poller hands to nothing) and written again (INSERT). The item carries a
// status, as a run does (the runs poller hands over nothing else).
func (r *pollerRig) insert(pk string, n int) {
	r.t.Helper()
	if n > 1 {
		if _, err := r.e.Client().DeleteItem(r.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.tbl),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}}}); err != nil {
			r.t.Fatal(err)
		}
	}
	if _, err := r.e.Client().PutItem(r.ctx, &dynamodb.PutItemInput{TableName: aws.String(r.tbl),
		Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "n": &types.AttributeValueMemberN{Value: strconv.Itoa(n)},
			"status": &types.AttributeValueMemberS{Value: "pending"}}}); err != nil {
		r.t.Fatal(err)
	}
}

// handedRec is what a runs poller handed the handler: the run and its
// record's number.
type handedRec struct {
	pk string
	n  int
}

// runRuns starts the runs stream's poller as the stack makes it
// (newRunsPoller) over the rig's table, with handle deciding each record
// (false: retry it); stop cancels it and waits until it has stopped. It
// fails the test if the poller hands more than one record per call.
func (r *pollerRig) runRuns(cp checkpoints, clk *retryClock, retryFor time.Duration, handle func(ctx context.Context, h handedRec) bool) (stop func()) {
	p, err := newRunsPoller(r.tbl, func(ctx context.Context, recs []stream.StreamRecord) []string {
		if len(recs) != 1 {
			r.t.Errorf("the runs poller handed %d records in one call, want 1 (BatchSize 1)", len(recs))
		}
		for i, rec := range recs {
			n, _ := strconv.Atoi(rec.NewImage["n"].(*types.AttributeValueMemberN).Value)
			if !handle(ctx, handedRec{pk: rec.Keys["pk"].(*types.AttributeValueMemberS).Value, n: n}) {
				var retry []string
				for _, rest := range recs[i:] {
					retry = append(retry, rest.EventID)
				}
				return retry
			}
		}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	p.sc, p.arn, p.log = r.e.StreamsClient(), r.arn, slog.New(slog.NewTextHandler(testWriter{r.t}, nil))
	p.interval, p.idleMax, p.cp, p.retryFor, p.now, p.sleep = 5*time.Millisecond, 50*time.Millisecond, cp, retryFor, clk.now, clk.sleep
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	return func() { cancel(); <-done }
}

// TestRunsPollerKeepsOrderPerRunAndRunsRunsConcurrently: the runs stream
// is handed over as the deployed executor's mapping does (BatchSize 1,
// ParallelizationFactor 10). A run whose record blocks in the handler
// holds back its own later record and no other run's: the records of
// twelve other runs, written after it, are all handled while it blocks,
// each run's in its stream order and never two of one run at once, and
// never more than devStreamParallel at once. Once released, the blocked
// run's later record follows. (A poller handing its batch in order, one
// record after another, hands nothing past the blocked record.)
func TestRunsPollerKeepsOrderPerRunAndRunsRunsConcurrently(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		r := newPollerRig(t, e)
		clk := &retryClock{t: time.Unix(1_700_000_000, 0)}
		release := make(chan struct{})
		blocked := make(chan struct{}, 1)
		var mu sync.Mutex
		next := map[string]int{} // each run's next record number
		running := map[string]bool{}
		inFlight, maxInFlight := 0, 0
		handled := 0
		stop := r.runRuns(nil, clk, time.Hour, func(ctx context.Context, h handedRec) bool {
			mu.Lock()
			if running[h.pk] {
				t.Errorf("run %s: record %d handed while another record of the run was being handled", h.pk, h.n)
			}
			if h.n != next[h.pk]+1 {
				t.Errorf("run %s: record %d handed after record %d", h.pk, h.n, next[h.pk])
			}
			running[h.pk] = true
			inFlight++
			maxInFlight = max(maxInFlight, inFlight)
			mu.Unlock()
			if h.pk == "slow" && h.n == 1 {
				blocked <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			mu.Lock()
			defer mu.Unlock()
			running[h.pk] = false
			inFlight--
			next[h.pk] = h.n
			handled++
			return true
		})
		defer stop()

		r.insert("slow", 1)
		select {
		case <-blocked:
		case <-r.ctx.Done():
			t.Fatal("never: the slow run's first record handed over")
		}
		r.insert("slow", 2)
		const runs, records = 12, 3
		for n := 1; n <= records; n++ {
			for i := range runs {
				r.insert(fmt.Sprintf("run-%02d", i), n)
			}
		}
		r.await("every other run's records handled while the slow run blocks", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return handled == runs*records
		})
		mu.Lock()
		if next["slow"] != 0 {
			t.Errorf("the slow run's record %d ended before it was released", next["slow"])
		}
		mu.Unlock()
		close(release)
		r.await("the slow run's second record handled after its first", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return next["slow"] == 2
		})
		mu.Lock()
		defer mu.Unlock()
		if maxInFlight > devStreamParallel {
			t.Errorf("%d records handled at once, want at most %d", maxInFlight, devStreamParallel)
		}
	})
}

// TestRunsPollerRetriesAFailedRecordWithItsRunsLaterRecords: a record that
// fails is retried (with backoff) with every later record of its run held
// behind it, while the records of other runs, written after it, are
// handled; once it succeeds its run's next record follows. A record that
// keeps failing past the retry time is dropped, and its run's next record
// is then handed over.
func TestRunsPollerRetriesAFailedRecordWithItsRunsLaterRecords(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		r := newPollerRig(t, e)
		clk := &retryClock{t: time.Unix(1_700_000_000, 0)}
		var mu sync.Mutex
		tries := map[handedRec]int{}
		var order []handedRec
		failing := true // flaky's first record fails until the test says
		stop := r.runRuns(nil, clk, 1000*time.Hour, func(_ context.Context, h handedRec) bool {
			mu.Lock()
			defer mu.Unlock()
			tries[h]++
			if h == (handedRec{"flaky", 1}) && failing {
				return false
			}
			order = append(order, h)
			return true
		})
		r.insert("flaky", 1)
		r.await("the flaky record failed", func() bool { mu.Lock(); defer mu.Unlock(); return tries[handedRec{"flaky", 1}] > 0 })
		r.insert("flaky", 2)
		r.insert("other", 1)
		r.insert("other", 2)
		r.await("the other run's records handled while the flaky one fails", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return tries[handedRec{"other", 2}] > 0
		})
		r.await("the flaky record retried", func() bool { mu.Lock(); defer mu.Unlock(); return tries[handedRec{"flaky", 1}] >= 3 })
		mu.Lock()
		if n := tries[handedRec{"flaky", 2}]; n != 0 {
			t.Errorf("the flaky run's second record was handed %d times while its first was failing", n)
		}
		failing = false
		mu.Unlock()
		r.await("the flaky run's second record handled", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return tries[handedRec{"flaky", 2}] > 0
		})
		stop()
		mu.Lock()
		if i, j := index(order, handedRec{"flaky", 1}), index(order, handedRec{"flaky", 2}); i < 0 || j < i {
			t.Errorf("the flaky run's records ended in the order %v", order)
		}
		mu.Unlock()

		// A record failing for the whole retry time (a minute here) is
		// dropped; its run's next record is handed over then. (A new
		// poller, from the stream's start: the records above are handled
		// again.)
		broken := map[int]int{}
		start := clk.now()
		stop = r.runRuns(nil, clk, time.Minute, func(_ context.Context, h handedRec) bool {
			mu.Lock()
			defer mu.Unlock()
			if h.pk != "broken" {
				return true
			}
			broken[h.n]++
			return h.n != 1
		})
		defer stop()
		r.insert("broken", 1)
		r.insert("broken", 2)
		r.await("the broken run's next record handled", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return broken[2] > 0
		})
		mu.Lock()
		defer mu.Unlock()
		if d := clk.now().Sub(start); d < time.Minute || broken[1] < 5 {
			t.Errorf("the broken record was dropped after %d tries and %s of retry time, want it retried for a minute", broken[1], d)
		}
	})
}

func index(hs []handedRec, h handedRec) int {
	for i, x := range hs {
		if x == h {
			return i
		}
	}
	return -1
}

// TestRunsPollerCheckpointNeverPassesAnUnhandledRecord: the runs poller's
// checkpoint moves past the records handled before a record that fails,
// and never past that record, although records of other runs written after
// it are handled meanwhile; nor past a record whose handling the stop
// interrupted (a stopped or killed `idemkit dev`). A poller restarted on
// the same checkpoints is handed both again (and the later records handled
// meanwhile: handlers are idempotent), and not the records before them.
func TestRunsPollerCheckpointNeverPassesAnUnhandledRecord(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		r := newPollerRig(t, e)
		clk := &retryClock{t: time.Unix(1_700_000_000, 0)}
		cp := newMemCheckpoints()
		var mu sync.Mutex
		tries := map[string]int{}
		inHandler := make(chan struct{}, 1)
		stop := r.runRuns(cp, clk, 1000*time.Hour, func(ctx context.Context, h handedRec) bool {
			mu.Lock()
			tries[h.pk]++
			mu.Unlock()
			switch h.pk {
			case "stuck":
				return false
			case "interrupted":
				// Handling ends only with the poller: like the executor,
				// it reports a failure when its context ends.
				select {
				case inHandler <- struct{}{}:
				default:
				}
				<-ctx.Done()
				return false
			}
			return true
		})
		r.insert("first", 1)
		r.await("the first record handled and checkpointed", func() bool {
			cp.mu.Lock()
			written := len(cp.seq) > 0
			cp.mu.Unlock()
			return written // the first record is the stream's only one
		})
		r.insert("stuck", 1)
		r.insert("interrupted", 1)
		r.insert("later", 1)
		select {
		case <-inHandler:
		case <-r.ctx.Done():
			t.Fatal("never: the interrupted record handed over")
		}
		r.await("the later record handled and the stuck one tried 10 times", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return tries["later"] > 0 && tries["stuck"] >= 10
		})
		stop()

		again := map[string]int{}
		stop = r.runRuns(cp, clk, 1000*time.Hour, func(_ context.Context, h handedRec) bool {
			mu.Lock()
			defer mu.Unlock()
			again[h.pk]++
			return true
		})
		defer stop()
		r.await("the restarted poller handed the stuck, interrupted and later records", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return again["stuck"] > 0 && again["interrupted"] > 0 && again["later"] > 0
		})
		mu.Lock()
		defer mu.Unlock()
		if again["first"] != 0 {
			t.Errorf("the restarted poller handed the handled first record again: the checkpoint did not move past it")
		}
	})
}
