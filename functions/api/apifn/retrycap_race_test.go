package apifn

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestParallelRetriesStopAtTheCap: a failed run that lists
// MaxRunRetries-1 retries, retried by parallel requests under distinct
// keys, takes exactly one more: it then lists MaxRunRetries, one request
// is answered 201 and every other 409 CodeRetryLimitReached. The cap was
// checked against the run as each request read it and the write that
// lists a retry had no condition, so racing retries all passed the check
// and the list went past the cap (16 parallel retries of a run at 99 left
// 103 to 112 listed), toward DynamoDB's item limit. Without transactions
// the refused retry's run, written before its listing, is not left behind
// either: the only run retrying the failed one is the listed one. On
// memory, on every engine, and with the run written in the completion
// transaction where the engine has transactions.
func TestParallelRetriesStopAtTheCap(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		rs, st := backendStores(t, e)
		parallelRetriesAtTheCap(t, e, rs, st)
	})
	t.Run("transactional", func(t *testing.T) {
		dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
			rs, st := dynamoStores(t, e, e.Client(dynamotest.FastRetries), true)
			parallelRetriesAtTheCap(t, e, rs, st)
		})
	})
}

func parallelRetriesAtTheCap(t *testing.T, e *dynamotest.Emulator, rs runs.RunStore, st idem.Store) {
	ctx := context.Background()
	const tenant, n = "acme", 16
	gate := &readGate{RunStore: rs, n: n, open: make(chan struct{})}
	f := hostOf(t, gate, idem.Config{Store: st}, nil)
	failed := failedBelowTheCap(t, rs, tenant, time.Now())
	gate.id = failed.ID
	type answer struct {
		resp retryAnswer
		err  error
	}
	got := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := f.h.Handle(ctx, ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", tenant, fmt.Sprintf("k-race-%02d-0123456789abcdefgh", i), ""))
			got[i] = answer{retryAnswer{r.StatusCode, r.Body}, err}
		}()
	}
	close(start)
	wg.Wait()
	created := 0
	for i, a := range got {
		switch {
		case a.err != nil:
			t.Errorf("retry %d: %v", i, a.err)
		case a.resp.status == http.StatusCreated:
			created++
		case a.resp.status != http.StatusConflict || !strings.Contains(a.resp.body, `"`+CodeRetryLimitReached+`"`):
			t.Errorf("retry %d: %d %s; want 201 or 409 %s", i, a.resp.status, a.resp.body, CodeRetryLimitReached)
		}
	}
	if created != 1 {
		t.Errorf("%d of %d parallel retries at %d listed were answered 201; want 1", created, n, MaxRunRetries-1)
	}
	run, err := rs.Get(ctx, failed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Retries) != MaxRunRetries {
		t.Errorf("after %d parallel retries the failed run lists %d retries; want %d", n, len(run.Retries), MaxRunRetries)
	}
	// A run retrying the failed run that it does not list (written before
	// its listing was refused) is not left live.
	for _, r := range retryRunsOf(t, e, rs, failed.ID) {
		if !slices.Contains(run.Retries, r.ID) && r.Status != runs.StatusCancelled {
			t.Errorf("run %s retries the failed run, is not listed on it, and is %s; want it cancelled", r.ID, r.Status)
		}
	}
}

// readGate holds the answer to every read of run id until n were made,
// so that n racing requests all read it as it was before any of them wrote: the
// race, on every backend, every time.
type readGate struct {
	runs.RunStore
	id   string
	n    int
	mu   sync.Mutex
	seen int
	open chan struct{}
}

func (g *readGate) Get(ctx context.Context, id string) (runs.Run, error) {
	r, err := g.RunStore.Get(ctx, id)
	if id == g.id {
		g.mu.Lock()
		if g.seen++; g.seen == g.n {
			close(g.open)
		}
		g.mu.Unlock()
		select {
		case <-g.open:
		case <-time.After(10 * time.Second):
		}
	}
	return r, err
}

// retryAnswer is an answer's status and body.
type retryAnswer struct {
	status int
	body   string
}

// retryRunsOf are the runs whose RetryOf is failed: in the
// memory store every run but the failed one (the test writes no other),
// in a RunsTable those a scan finds.
func retryRunsOf(t *testing.T, e *dynamotest.Emulator, rs runs.RunStore, failed string) []runs.Run {
	t.Helper()
	if e == nil {
		m := rs.(*runs.MemRuns)
		if n := m.Len(); n != 2 {
			t.Errorf("the store holds %d runs; want the failed run and its one retry", n)
		}
		return nil
	}
	d := rs.(*runs.DynamoRuns)
	var found []runs.Run
	var from map[string]types.AttributeValue
	for {
		out, err := d.Client.(*dynamodb.Client).Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(d.Table), ConsistentRead: aws.Bool(true), ExclusiveStartKey: from})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			if r, ok := runs.RunFromItem(it); ok && r.RetryOf == failed {
				found = append(found, r)
			}
		}
		if from = out.LastEvaluatedKey; len(from) == 0 {
			return found
		}
	}
}

// failedBelowTheCap writes a failed run of tenant, at now, listing
// MaxRunRetries-1 retries: one place left under the cap.
func failedBelowTheCap(t *testing.T, rs runs.RunStore, tenant string, now time.Time) runs.Run {
	t.Helper()
	ctx := context.Background()
	failed := runs.NewRun(tenant, "conformance-noop", nil, now)
	if err := rs.Create(ctx, failed); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Transition(ctx, failed.ID, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", now); err != nil {
		t.Fatal(err)
	}
	for i := range MaxRunRetries - 1 {
		if err := rs.LinkRetry(ctx, failed.ID, fmt.Sprintf("%s/%022d", tenant, i)); err != nil {
			t.Fatal(err)
		}
	}
	return failed
}
