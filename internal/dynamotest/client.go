package dynamotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/tables"
)

// Client returns a DynamoDB client for e: static credentials, e.Region, the
// SDK's standard retryer (3 attempts). optFns run last, so they can override
// anything (Region, Retryer, APIOptions from Counter/Faults middleware, ...).
func (e *Emulator) Client(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	region := func(o *dynamodb.Options) { o.Region = e.Region }
	return emulator.Client(e.Endpoint, append([]func(*dynamodb.Options){region}, optFns...)...)
}

// StreamsClient returns a DynamoDB Streams client for e (meaningful only when
// e.Caps.Streams).
func (e *Emulator) StreamsClient(optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	region := func(o *dynamodbstreams.Options) { o.Region = e.Region }
	return emulator.StreamsClient(e.Endpoint, append([]func(*dynamodbstreams.Options){region}, optFns...)...)
}

// FastRetries is a client option keeping the SDK's standard retry policy
// (which errors are retried, 3 attempts) but with a backoff of at most a few
// milliseconds (1 ms), so tests that inject retryable faults do not sleep. It also
// disables the client-side retry quota.
func FastRetries(o *dynamodb.Options) {
	o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
		so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) {
			return time.Millisecond, nil
		})
		so.RateLimiter = ratelimit.None
	})
}

// CreateTable creates a table shaped like the template.yaml resource
// logicalID (e.g. "EffectsTable") under a unique name in e.Region, waits
// until it is ACTIVE, enables TTL where the emulator supports it and does
// not delete expired items (see Emulator.DeletesExpired), and deletes the
// table when the test ends. It returns the table name.
func (e *Emulator) CreateTable(t testing.TB, logicalID string) string {
	t.Helper()
	name := uniqueName(logicalID)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := e.Client()
	defs, err := tables.Embedded()
	if err != nil {
		t.Fatalf("dynamotest: %v", err)
	}
	def, ok := defs[logicalID]
	if !ok {
		t.Fatalf("dynamotest: template.yaml has no table %q", logicalID)
	}
	if e.DeletesExpired {
		def.TTLAttribute = ""
	}
	if _, err := tables.CreateDef(ctx, c, def, name); err != nil {
		t.Fatalf("dynamotest: %s: %v", e.Kind, err)
	}
	deleteAtEnd(t, c, name)
	return name
}

// uniqueName returns prefix, a dash and twelve random hex digits: a table
// name no other test uses.
func uniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// deleteAtEnd deletes the table name when the test ends.
func deleteAtEnd(t testing.TB, c *dynamodb.Client, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
}
