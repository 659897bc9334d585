package dynamostore_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
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
// stopped answering mid-completion).
type stalledChunks struct {
	passingFaults
	deletes atomic.Int32
}

func (f *stalledChunks) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if pk, ok := in.Item["pk"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(pk.Value, "chunk:") {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &dynamodb.PutItemOutput{}, nil
}

func (f *stalledChunks) DeleteItem(ctx context.Context, _ *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	f.deletes.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestStalledChunkedCompletionKeepsTheStoreBound: a large answer's chunk
// writes that the store never answers are cut at the call's bound
// (Config.StoreTimeout), and the best-effort deletes of the chunks after
// them are bounded too: the request is answered 503
// idemkit.store_unavailable within that bound (plus the deletes' short
// grace), as Config.StoreTimeout guarantees, never held while the store
// stalls. The chunks a stalled delete leaves expire with the record's
// retention, referenced by nothing.
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
	start := time.Now()
	go func() {
		r, _ := g.HTTPAPI(func(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: body}, nil
		})(context.Background(), guardEvent(newKey(), `{}`))
		done <- r
	}()
	select {
	case r := <-done:
		if took := time.Since(start); took > bound+time.Second {
			t.Errorf("answered after %v, want within the store bound %v", took, bound)
		}
		if r.StatusCode != 503 || !strings.Contains(r.Body, idem.CodeStoreUnavailable) {
			t.Errorf("answered %d %s, want 503 %s", r.StatusCode, r.Body, idem.CodeStoreUnavailable)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("request held for 5 s by a stalled store (bound %v; %d chunk deletes waiting)", bound, f.deletes.Load())
	}
}
