package boot

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestDynamoClientRetriesATransactionConflict: a single-item write refused
// because a transaction holds its item (TransactionConflictException, HTTP
// 400) did not apply, and the SDK's standard retryer gives it up at once;
// the functions' client retries it like a throttle, so a request that
// meets another's completion transaction is not answered 503 for it.
func TestDynamoClientRetriesATransactionConflict(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException","message":"Transaction is ongoing for the item"}`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	c, err := DynamoClient(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("T"),
		Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}})
	if err != nil || calls.Load() != 2 {
		t.Fatalf("PutItem: %v after %d calls, want success on the second", err, calls.Load())
	}
}

// TestDynamoClientKeepsTheResolvedRetryer: the conflict retry wraps the
// retryer the DynamoDB client resolves, never replaces it: a call failing
// with a 500 is tried as many times as by a client built the SDK's way
// (DynamoDB's own default attempts), and AWS_RETRY_MODE=adaptive stays
// adaptive.
func TestDynamoClientKeepsTheResolvedRetryer(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"boom"}`))
	}))
	defer srv.Close()
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	attempts := func(c *dynamodb.Client) int32 {
		calls.Store(0)
		_, _ = c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("T"),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "x"}}})
		return calls.Load()
	}
	ours, err := DynamoClient(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sdk := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	if a, b := attempts(ours), attempts(sdk); a != b || a < 2 {
		t.Fatalf("%d attempts, the SDK's client %d", a, b)
	}
	t.Setenv("AWS_RETRY_MODE", "adaptive")
	ad, err := DynamoClient(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprintf("%#v", ad.Options().Retryer); !strings.Contains(s, "Adaptive") {
		t.Fatalf("AWS_RETRY_MODE=adaptive: the retryer is %T", ad.Options().Retryer)
	}
}
