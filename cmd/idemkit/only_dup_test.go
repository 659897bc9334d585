package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// RED_TEAM 517: a table named twice in --only (idempotency,idempotency,
// or by its short name and its logical ID, or in two --only flags) is one
// table. Before, doctor checked and printed it once per mention ("could
// not check IdempotencyTable, IdempotencyTable, IdempotencyTable").
// `tables create` with a table named twice creates it once (it held
// before: an existing table is taken as made).
func TestOnlyNamesEachTableOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	run(ctx, []string{"doctor", "--endpoint", dead, "--only", "idempotency,IdempotencyTable", "--only", "idempotency"}, &out, &errb)
	if n := strings.Count("\n"+out.String(), "\nIdempotencyTable\t"); n != 1 || strings.Contains(errb.String(), "IdempotencyTable, IdempotencyTable") {
		t.Errorf("doctor --only naming one table three times: %d lines for it\n%s%s", n, out.String(), errb.String())
	}

	e := dynamotest.Start(t, dynamotest.Moto)
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := "only-" + hex.EncodeToString(b[:]) + "-"
	t.Cleanup(func() {
		_, _ = e.Client().DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(prefix + "IdempotencyTable")})
	})
	out.Reset()
	errb.Reset()
	if code := run(ctx, []string{"tables", "create", "--endpoint", e.Endpoint, "--region", e.Region, "--prefix", prefix, "--only", "idempotency,idempotency"}, &out, &errb); code != 0 {
		t.Errorf("tables create --only idempotency,idempotency: exit %d, want 0\n%s%s", code, out.String(), errb.String())
	}
}
