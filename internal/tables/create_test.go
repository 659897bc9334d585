package tables_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func TestCreateAll(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := e.Client()
		var b [4]byte
		_, _ = rand.Read(b[:])
		prefix := "all-" + hex.EncodeToString(b[:]) + "-"
		names, err := tables.CreateAll(ctx, c, prefix)
		t.Cleanup(func() {
			for _, n := range names {
				_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(n)})
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defs, _ := tables.Embedded()
		if len(names) != len(defs) {
			t.Fatalf("created %v", names)
		}
		for id, n := range names {
			if n != prefix+id {
				t.Errorf("%s named %s", id, n)
			}
			out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(n)})
			if err != nil || out.Table.TableStatus != "ACTIVE" {
				t.Errorf("%s: %v %+v", n, err, out)
			}
		}
		// Creating an existing table is an error.
		if err := tables.Create(ctx, c, "FenceTable", names["FenceTable"]); err == nil {
			t.Error("re-creating a table succeeded")
		}
		if err := tables.Create(ctx, c, "NoSuchTable", "x"); err == nil {
			t.Error("unknown logical ID accepted")
		}
	})
}

// TestTTLUnsupportedIsReported: dynalite has no UpdateTimeToLive; creation
// succeeds and the result says TTL was not applied.
func TestTTLUnsupportedIsReported(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		defs, err := tables.Embedded()
		if err != nil {
			t.Fatal(err)
		}
		var b [4]byte
		_, _ = rand.Read(b[:])
		name := "ttl-" + hex.EncodeToString(b[:])
		c := e.Client()
		res, err := tables.CreateDef(ctx, c, defs["IdempotencyTable"], name)
		t.Cleanup(func() {
			_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.TTL != e.Caps.TTL {
			t.Errorf("TTL applied %v, emulator TTL capability %v", res.TTL, e.Caps.TTL)
		}
		if !res.TTL && !tables.IsUnsupported(res.TTLError) {
			t.Errorf("TTL not applied but no unsupported error: %v", res.TTLError)
		}
		if (res.StreamARN != "") != e.Caps.Streams {
			t.Errorf("stream ARN %q with Streams=%v", res.StreamARN, e.Caps.Streams)
		}
	})
}
