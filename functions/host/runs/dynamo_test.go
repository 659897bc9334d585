package runs

import (
	"context"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func TestDynamoRuns(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		cnt := dynamotest.NewCounter()
		faults := dynamotest.NewFaults()
		c := e.Client(dynamotest.FastRetries, cnt.Middleware(), faults.Middleware())
		runs := &DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
		now := time.Now().UTC().Truncate(time.Millisecond)
		r := NewRun("acme", "webhook", []byte(`{"url":"https://x"}`), now)

		cnt.Reset()
		if err := runs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := runs.Create(ctx, r); !errors.Is(err, ErrRunExists) {
			t.Fatalf("second create: %v", err)
		}
		got, err := runs.Get(ctx, r.ID)
		if err != nil || got.ID != r.ID || got.Tenant != "acme" || string(got.Inputs) != string(r.Inputs) || !got.CreatedAt.Equal(now) {
			t.Fatalf("%+v %v", got, err)
		}
		// The recipe stamps are stored with the run and read back as written.
		if got.Stamps != identity.CurrentStamps() {
			t.Fatalf("stamps %+v, want %+v", got.Stamps, identity.CurrentStamps())
		}
		if n := cnt.Total(); n != 3 {
			t.Fatalf("create+create+get took %d round trips, want 3 (%v)", n, cnt.Ops())
		}
		// A run without stamps is refused before any round trip.
		cnt.Reset()
		unstamped := r
		unstamped.ID, unstamped.Stamps = NewRunID("acme"), identity.Stamps{}
		if err := runs.Create(ctx, unstamped); !errors.Is(err, ledger.ErrUnsupportedRecipe) || cnt.Total() != 0 {
			t.Fatalf("unstamped create: %v after %d round trips", err, cnt.Total())
		}
		if _, err := runs.Get(ctx, "acme/nonexistentnonexistent"); !errors.Is(err, ErrRunNotFound) {
			t.Fatal(err)
		}
		if _, err := runs.Transition(ctx, "acme/nonexistentnonexistent", []Status{StatusPending}, StatusRunning, "", now); !errors.Is(err, ErrRunNotFound) {
			t.Fatal(err)
		}

		// Of concurrent pending->running transitions exactly one wins.
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := 0; i < 12; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := runs.Transition(ctx, r.ID, []Status{StatusPending}, StatusRunning, "", now)
				if err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				} else if !errors.Is(err, ErrStatusConflict) {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d transitions won", wins)
		}
		cnt.Reset()
		cur, err := runs.Transition(ctx, r.ID, []Status{StatusPending, StatusRunning}, StatusFailed, "boom", now.Add(time.Second))
		if err != nil || cur.Status != StatusFailed || cur.Error != "boom" || cnt.Total() != 1 {
			t.Fatalf("%+v %v (%d round trips)", cur, err, cnt.Total())
		}
		cur, err = runs.Transition(ctx, r.ID, []Status{StatusPending, StatusRunning}, StatusCancelled, "", now)
		if !errors.Is(err, ErrStatusConflict) || cur.Status != StatusFailed {
			t.Fatalf("%+v %v", cur, err)
		}

		// A finished run takes no more failures: NoteFailure changes nothing
		// (updatedAt, lastError, failures) and says the run has ended.
		before, _ := runs.Get(ctx, r.ID)
		if _, err := runs.NoteFailure(ctx, r.ID, "late", now.Add(time.Hour)); !errors.Is(err, ErrStatusConflict) {
			t.Fatalf("NoteFailure on a failed run: %v", err)
		}
		if after, _ := runs.Get(ctx, r.ID); !after.UpdatedAt.Equal(before.UpdatedAt) || after.LastError != before.LastError || after.Failures != before.Failures {
			t.Fatalf("a late failure changed a finished run: %+v -> %+v", before, after)
		}

		// NoteFailure counts atomically, one round trip each, under
		// concurrency; the count and last error are read back with the run.
		r = NewRun("acme", "webhook", []byte(`{"url":"https://x"}`), now)
		if err := runs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		cnt.Reset()
		var nwg sync.WaitGroup
		for i := 0; i < 5; i++ {
			nwg.Add(1)
			go func() {
				defer nwg.Done()
				if _, err := runs.NoteFailure(ctx, r.ID, "effect in flight", now); err != nil {
					t.Error(err)
				}
			}()
		}
		nwg.Wait()
		if n, err := runs.NoteFailure(ctx, r.ID, "", now); err != nil || n != 6 || cnt.Total() != 6 {
			t.Fatalf("count %d %v after %d round trips", n, err, cnt.Total())
		}
		if got, _ := runs.Get(ctx, r.ID); got.Failures != 6 || got.LastError != "(no message)" || got.Status != StatusPending {
			t.Fatalf("%+v", got)
		}
		if _, err := runs.NoteFailure(ctx, "acme/nonexistentnonexistent", "x", now); !errors.Is(err, ErrRunNotFound) {
			t.Fatal(err)
		}

		// An injected throttle surfaces as an error and writes nothing; the
		// retry succeeds.
		r2 := r
		r2.ID = NewRunID("acme")
		faults.FailNext("PutItem", 5, dynamotest.Throttle())
		if err := runs.Create(ctx, r2); err == nil {
			t.Fatal("create under throttling succeeded")
		}
		faults.Clear()
		if _, err := runs.Get(ctx, r2.ID); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("a failed create left a run: %v", err)
		}
		if err := runs.Create(ctx, r2); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTransactionalRunCreate: under a Layer-1 claim the run is written in
// the completion transaction, so it exists iff the 201 was recorded: a
// handler that "created" a run and then failed leaves no run behind, and a
// retry with the same key creates exactly one.
func TestTransactionalRunCreate(t *testing.T) {
	// Without transactions (dynalite) createRun uses a conditional PutItem:
	// TestDynamoRuns covers that path.
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		c := e.Client()
		runs := &DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable"), Transactional: true}
		st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
		if err != nil {
			t.Fatal(err)
		}
		g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: st})
		if err != nil {
			t.Fatal(err)
		}
		var created []string
		fail := true
		h := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			r := NewRun("acme", "conformance-noop", nil, time.Now())
			if err := runs.Create(ctx, r); err != nil {
				return events.APIGatewayV2HTTPResponse{}, err
			}
			created = append(created, r.ID)
			if fail {
				return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusInternalServerError}, nil
			}
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: `{"runId":"` + r.ID + `"}`}, nil
		})
		ev := events.APIGatewayV2HTTPRequest{RouteKey: "POST /runs", Body: `{}`,
			Headers: map[string]string{"idempotency-key": "k-0123456789abcdefghijkl", "content-type": "application/json"}}
		ev.RequestContext.HTTP.Method = "POST"
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}}
		if r, _ := h(ctx, ev); r.StatusCode != 500 {
			t.Fatalf("status %d", r.StatusCode)
		}
		if _, err := runs.Get(ctx, created[0]); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("the failed attempt's run was written: %v", err)
		}
		fail = false
		r1, _ := h(ctx, ev)
		r2, _ := h(ctx, ev)
		if r1.StatusCode != 201 || r2.StatusCode != 201 || r1.Body != r2.Body || len(created) != 2 {
			t.Fatalf("%d %s / %d %s, %d executions", r1.StatusCode, r1.Body, r2.StatusCode, r2.Body, len(created))
		}
		if _, err := runs.Get(ctx, created[1]); err != nil {
			t.Fatalf("committed run missing: %v", err)
		}
	})
}

// TestTransactionalRunCreateFaults injects DynamoDB faults into the
// completion transaction: a failed commit leaves no run and a same-key
// retry creates exactly one; a commit whose response was lost is
// recognised, so the retry replays the committed run instead of creating a
// second one. At the end the table holds one run per key.
func TestTransactionalRunCreateFaults(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Transactions, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		faults := dynamotest.NewFaults()
		c := e.Client(dynamotest.FastRetries, faults.Middleware())
		runsTable := e.CreateTable(t, "RunsTable")
		runs := &DynamoRuns{Client: c, Table: runsTable, Transactional: true}
		st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
		if err != nil {
			t.Fatal(err)
		}
		g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: st})
		if err != nil {
			t.Fatal(err)
		}
		h := g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			r := NewRun("acme", "conformance-noop", nil, time.Now())
			if err := runs.Create(ctx, r); err != nil {
				return events.APIGatewayV2HTTPResponse{}, err
			}
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: `{"runId":"` + r.ID + `"}`}, nil
		})
		call := func(key string) events.APIGatewayV2HTTPResponse {
			ev := events.APIGatewayV2HTTPRequest{RouteKey: "POST /runs", Body: `{}`,
				Headers: map[string]string{"idempotency-key": key, "content-type": "application/json"}}
			ev.RequestContext.HTTP.Method = "POST"
			ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}}
			r, _ := h(ctx, ev)
			return r
		}
		cases := []struct {
			name  string
			after bool
			err   error
		}{
			{"commit fails", false, dynamotest.InternalServerError()},
			{"commit throttled past the retries", false, dynamotest.Throttle()},
			{"commit response lost", true, dynamotest.ResponseLost()},
		}
		for i, tc := range cases {
			key := "fault-" + string(rune('a'+i)) + "-0123456789abcdefghij"
			if tc.after {
				faults.FailNextAfterSend("TransactWriteItems", 1, tc.err)
			} else {
				faults.FailNext("TransactWriteItems", 5, tc.err)
			}
			first := call(key)
			faults.Clear()
			var final events.APIGatewayV2HTTPResponse
			for try := 0; try < 5; try++ {
				if final = call(key); final.StatusCode == 201 {
					break
				}
			}
			if final.StatusCode != 201 {
				t.Fatalf("%s: first %d %s, retry %d %s", tc.name, first.StatusCode, first.Body, final.StatusCode, final.Body)
			}
			if first.StatusCode == 201 && first.Body != final.Body {
				t.Fatalf("%s: two different 201s: %s / %s", tc.name, first.Body, final.Body)
			}
		}
		out, err := e.Client().Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(runsTable)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Items) != len(cases) {
			t.Fatalf("%d runs for %d keys: a fault produced an orphan or a duplicate run", len(out.Items), len(cases))
		}
	})
}
