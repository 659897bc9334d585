package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// valueQuotingFault fails the next n calls of op with a service message
// quoting every string value the call sent (its item and expression
// values), as a ValidationException or a conditional-check failure's
// message may quote what it refused.
func valueQuotingFault(op string, n *int) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("idemkit.test.valueQuotingFault",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					p, ok := in.Parameters.(*dynamodb.PutItemInput)
					if middleware.GetOperationName(ctx) != op || !ok || *n == 0 {
						return next.HandleInitialize(ctx, in)
					}
					*n--
					var q []string
					for _, m := range []map[string]types.AttributeValue{p.Item, p.ExpressionAttributeValues} {
						for _, v := range m {
							if s, ok := v.(*types.AttributeValueMemberS); ok {
								q = append(q, s.Value)
							}
						}
					}
					return middleware.InitializeOutput{}, middleware.Metadata{}, &smithy.GenericAPIError{Code: "ValidationException",
						Message: "One or more parameter values were invalid: " + strings.Join(q, ", ")}
				}), middleware.After)
		})
	}
}

// TestARefusedRotationDoesNotQuoteASecret: `idemkit webhook secret rotate`
// against an --endpoint (LocalStack, an emulator) whose write is refused
// with a message quoting what it sent prints no signing secret on stderr:
// neither the one given on stdin (a live secret copied to another region's
// table) nor the current one, which a rotation sends as its condition. The
// CLI's clients word a DynamoDB error as the functions' do, each value the
// call sent replaced by its keyed hash (RED_TEAM 541); against AWS they
// did already.
func TestARefusedRotationDoesNotQuoteASecret(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	prefix := fmt.Sprintf("rq%d-", time.Now().UnixNano())
	table := prefix + "ApiKeysTable"
	var terr bytes.Buffer
	if code := run(ctx, []string{"tables", "create", "--only", "api-keys", "--prefix", prefix, "--endpoint", e.Endpoint}, &bytes.Buffer{}, &terr); code != 0 {
		t.Fatalf("tables create: %d %s", code, terr.String())
	}
	// Secrets whose text carries a marker: S3CR3T is base64 text.
	secret := func(n int) string {
		b64 := "S3CR3T" + strings.Repeat(fmt.Sprint(n), 34)
		if _, err := base64.StdEncoding.DecodeString(b64); err != nil {
			t.Fatal(err)
		}
		return "whsec_" + b64
	}
	rotate := func(given string, fail int) (int, string, string) {
		t.Helper()
		old := stdin
		stdin = strings.NewReader(given + "\n")
		defer func() { stdin = old }()
		setEndpointClientOptions(t, dynamotest.FastRetries, valueQuotingFault("PutItem", &fail))
		defer setEndpointClientOptions(t)
		var out, errb bytes.Buffer
		code := run(ctx, []string{"webhook", "secret", "rotate", "--tenant", "acme", "--secret", "-", "--endpoint", e.Endpoint, "--table", table}, &out, &errb)
		return code, out.String(), errb.String()
	}
	// The first secret, written (the table had none).
	if code, out, errb := rotate(secret(1), 0); code != 0 || strings.Contains(out+errb, "S3CR3T") {
		t.Fatalf("first rotation: exit %d, %q %q", code, out, errb)
	}
	// A second, refused: its item holds the new secret and the previous
	// one, its condition the current one.
	code, out, errb := rotate(secret(2), 1)
	if code != 1 || out != "" || !strings.Contains(errb, "parameter values were invalid") {
		t.Fatalf("refused rotation: exit %d, stdout %q, stderr %q; want 1 and the service's message", code, out, errb)
	}
	if strings.Contains(errb, "S3CR3T") {
		t.Fatalf("the refusal quotes a signing secret: %q", errb)
	}
}
