package securitytest

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/sweeper/sweepfn"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/awserr"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emf"
)

// TestNoRecordIDInSweeperLogsOnStoreFailures: the retention sweeper of a
// fenced-effects home stack deletes expired Layer-1 records, whose ids an
// idempotency key could be checked against. A Scan or a DeleteItem that
// fails with a service message quoting what it sent (the record's id, the
// page's start key) leaves the id in no log line nor EMF line: the
// sweeper's failure line carries the error as the function's client
// (boot.DynamoClient: awserr.RedactValues) words it, counts, never keys.
func TestNoRecordIDInSweeperLogsOnStoreFailures(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	table := e.CreateTable(t, "IdempotencyTable")
	ctx := context.Background()
	var ids []string
	for i := range 6 {
		id := keyspace.ID("tenant:acme", "POST /runs", marker+"-sweeper-key-"+strconv.Itoa(i))
		ids = append(ids, id)
		if _, err := e.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"pk":        &types.AttributeValueMemberS{Value: id},
			"expiresAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, op := range []string{"DeleteItem", "Scan"} {
		t.Run(op, func(t *testing.T) {
			var logs, metrics syncBuffer
			// The function's client as kit.Boot makes it: every call's
			// error redacted of what the call sent. The fault fails op's
			// calls that send a key (every DeleteItem; a Scan from its
			// second page, which starts after a record) with a message
			// quoting it.
			client := dynamodb.New(e.Client(dynamotest.FastRetries, keyQuotingFault(op)).Options(), awserr.RedactValues)
			h, err := sweepfn.NewFromEnv(settings.Env{Idem: idemenv.Env{Table: table}}, client, emf.New(&metrics, ""),
				slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
			if err != nil {
				t.Fatal(err)
			}
			for _, tg := range h.Targets {
				// One segment of pages of two: the second page starts
				// after a record.
				tg.Sweeper.PageSize, tg.Sweeper.Segments = 2, 1
			}
			if _, err := h.Sweep(ctx); err == nil {
				t.Fatal("the sweep did not fail")
			}
			out := logs.String() + metrics.String()
			if !strings.Contains(logs.String(), "sweeper: sweep failed") || !strings.Contains(logs.String(), "parameter values were invalid") {
				t.Fatalf("no failure line with the service's message logged:\n%s", logs.String())
			}
			for _, id := range ids {
				if strings.Contains(out, id) || strings.Contains(out, strings.TrimPrefix(id, keyspace.CallerPrefix)) {
					t.Fatalf("a record id is in the sweeper's log:\n%s", out)
				}
			}
			if strings.Contains(out, marker) {
				t.Fatalf("a key's marker is in the sweeper's log:\n%s", out)
			}
		})
	}
}

// keyQuotingFault fails every call of op that sends a key (quoted finds a
// string in it) with a service message quoting what it sent.
func keyQuotingFault(op string) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("securitytest.keyQuotingFault",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if q := quoted(in.Parameters); middleware.GetOperationName(ctx) == op && len(q) > 0 {
						return middleware.InitializeOutput{}, middleware.Metadata{}, &smithy.GenericAPIError{Code: "ValidationException",
							Message: "One or more parameter values were invalid: " + strings.Join(q, ", ")}
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	}
}
