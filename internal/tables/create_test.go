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

// TestEnsureKeepsExistingTables: Ensure creates only the tables asked for
// (all without a list), keeps a table that already exists instead of
// failing, and reports every table by logical ID; StreamARN names a
// table's stream and refuses a table without one.
func TestEnsureKeepsExistingTables(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := e.Client()
		var b [4]byte
		_, _ = rand.Read(b[:])
		prefix := "ensure-" + hex.EncodeToString(b[:]) + "-"
		var created map[string]string
		t.Cleanup(func() {
			for _, n := range created {
				_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(n)})
			}
		})
		one, err := tables.Ensure(ctx, c, prefix, []string{"RunsTable"})
		created = one
		if err != nil || len(one) != 1 || one["RunsTable"] != prefix+"RunsTable" {
			t.Fatalf("Ensure RunsTable: %v %v", one, err)
		}
		all, err := tables.Ensure(ctx, c, prefix, nil)
		created = all
		defs, _ := tables.Embedded()
		if err != nil || len(all) != len(defs) || all["RunsTable"] != one["RunsTable"] {
			t.Fatalf("Ensure all over an existing RunsTable: %v %v", all, err)
		}
		if arn, err := tables.StreamARN(ctx, c, all["RunsTable"]); err != nil || arn == "" {
			t.Fatalf("StreamARN(RunsTable) = %q, %v", arn, err)
		}
		if _, err := tables.StreamARN(ctx, c, all["ApiKeysTable"]); err == nil {
			t.Fatal("StreamARN of a table without a stream succeeded")
		}
	})
}
