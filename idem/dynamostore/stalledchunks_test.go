package dynamostore_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/dynamostore"
)

// stalledChunks is a table that takes the claim and then stalls: every
// chunk write and every delete waits for its context to end (a store that
// stopped answering mid-completion). It keeps the deadline each chunk
// write and each delete was given, and when each delete was made.
type stalledChunks struct {
	passingFaults
	deletes atomic.Int32
	mu      sync.Mutex
	puts    []deadline
	dels    []deadline
}

// deadline is a call's context deadline (ok false: none) and the time the
// call was made.
type deadline struct {
	at, made time.Time
	ok       bool
}

func called(ctx context.Context) deadline {
	at, ok := ctx.Deadline()
	return deadline{at: at, made: time.Now(), ok: ok}
}

func (f *stalledChunks) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if pk, ok := in.Item["pk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "chunk:") {
		f.mu.Lock()
		f.puts = append(f.puts, called(ctx))
		f.mu.Unlock()
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &dynamodb.PutItemOutput{}, nil
}

func (f *stalledChunks) DeleteItem(ctx context.Context, _ *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	f.deletes.Add(1)
	f.mu.Lock()
	f.dels = append(f.dels, called(ctx))
	f.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestStalledChunkedCompletionKeepsTheStoreBound: a large answer's chunk
// writes that the store never answers are cut at the call's bound
// (Config.StoreTimeout), and the best-effort deletes of the chunks after
// them are bounded too, as Config.StoreTimeout guarantees, never held
// while the store stalls. The record's write was never sent, so the
// not-kept outcome is written in its place, with a deadline of its own
// (RED_TEAM 420; this table takes it at once): the caller gets the true
// 201 (before, 503 with the record left claimed, and the handler ran
// again once the lease ended). The chunks a stalled delete leaves expire
// with the record's retention, referenced by nothing.
func TestStalledChunkedCompletionKeepsTheStoreBound(t *testing.T) {
	f := &stalledChunks{}
	s, err := dynamostore.New(dynamostore.Config{Client: f, Table: "T"})
	if err != nil {
		t.Fatal(err)
	}
	const bound = 300 * time.Millisecond
	g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: s, StoreTimeout: bound,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 1<<20)
	done := make(chan events.APIGatewayV2HTTPResponse, 1)
	go func() {
		r, _ := g.HTTPAPI(func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: body}, nil
		})(context.Background(), guardEvent(newKey(), `{}`))
		done <- r
	}()
	var r events.APIGatewayV2HTTPResponse
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("request held for 30 s by a stalled store (bound %v; %d chunk deletes waiting)", bound, f.deletes.Load())
	}
	if r.StatusCode != 201 || r.Body != body {
		t.Errorf("answered %d %.200s, want the true 201 (its not-kept outcome recorded)", r.StatusCode, r.Body)
	}
	// The bound is read from the deadlines the calls were given, not from
	// how long they took: each chunk write under the store bound, and each
	// delete under the chunk writes' deadline or the deletes' grace
	// (100 ms) from when it was made, whichever is later.
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.puts) == 0 || len(f.dels) == 0 {
		t.Fatalf("%d chunk writes, %d deletes; want both", len(f.puts), len(f.dels))
	}
	var putBy time.Time
	for _, p := range f.puts {
		if !p.ok || p.at.After(p.made.Add(bound)) {
			t.Fatalf("a chunk write was given deadline %v (set: %v), made at %v; want one within the store bound %v", p.at, p.ok, p.made, bound)
		}
		if p.at.After(putBy) {
			putBy = p.at
		}
	}
	for _, d := range f.dels {
		if !d.ok {
			t.Fatalf("a chunk delete was given no deadline: a stalled store holds the request past the store bound %v", bound)
		}
		if d.at.After(putBy) && d.at.After(d.made.Add(100*time.Millisecond)) {
			t.Errorf("a chunk delete was given deadline %v, later than the chunk writes' %v and the grace from when it was made (%v)", d.at, putBy, d.made)
		}
	}
}

// cancelledChunks is stalledChunks whose chunk writes cancel the call
// (cancel, the caller's) and whose deletes answer at once, keeping the
// deadline each was given.
type cancelledChunks struct {
	stalledChunks
	cancel context.CancelFunc
}

func (f *cancelledChunks) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	f.cancel()
	return f.stalledChunks.PutItem(ctx, in, o...)
}

func (f *cancelledChunks) DeleteItem(ctx context.Context, _ *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	f.mu.Lock()
	f.dels = append(f.dels, called(ctx))
	f.mu.Unlock()
	return &dynamodb.DeleteItemOutput{}, nil
}

// TestChunkDeletesOfACancelledCallWithoutADeadlineAreBounded: a large
// completion whose call is cancelled, without a deadline, while its chunk
// writes wait deletes the chunks it wrote within a bound of its own
// (idem.DefaultStoreTimeout from when the deletes start): a store that
// stalls then never holds the caller without bound. Judged by the
// deadline each delete was given, not by how long it took. Before, the
// deletes ran without any deadline.
func TestChunkDeletesOfACancelledCallWithoutADeadlineAreBounded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &cancelledChunks{cancel: cancel}
	s, err := dynamostore.New(dynamostore.Config{Client: f, Table: "T"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	r := pending(newID(), "o1", now)
	r.Attempt, r.Renewed = 1, now
	if err := s.Complete(ctx, r, finalOf(bodyResponse(incompressible(t, 1<<20)), now), now); err == nil {
		t.Fatal("Complete of a cancelled call succeeded")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.puts) == 0 || len(f.dels) == 0 {
		t.Fatalf("%d chunk writes, %d deletes; want both", len(f.puts), len(f.dels))
	}
	for _, d := range f.dels {
		if !d.ok {
			t.Fatal("a chunk delete of a call cancelled without a deadline was given no deadline")
		}
		if d.at.After(d.made.Add(idem.DefaultStoreTimeout)) {
			t.Errorf("a chunk delete was given deadline %v, made at %v: later than %v from then", d.at, d.made, idem.DefaultStoreTimeout)
		}
	}
}
