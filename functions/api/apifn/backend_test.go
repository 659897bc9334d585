package apifn

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// onEveryBackend runs fn on memory and on every emulator.
func onEveryBackend(t *testing.T, fn func(t *testing.T, e *dynamotest.Emulator)) {
	t.Run("memory", func(t *testing.T) { fn(t, nil) })
	dynamotest.ForEach(t, fn)
}

// backendStores are the runs and the Layer-1 store of onEveryBackend's
// backend: in memory (e nil), or in a RunsTable and an IdempotencyTable of
// e's.
func backendStores(t *testing.T, e *dynamotest.Emulator) (runs.RunStore, idem.Store) {
	t.Helper()
	if e == nil {
		return runs.NewMemRuns(), idemmem.New()
	}
	return dynamoStores(t, e, e.Client(dynamotest.FastRetries), false)
}

// dynamoStores are a RunsTable (Transactional as given) and an
// IdempotencyTable of e's, reached through c.
func dynamoStores(t *testing.T, e *dynamotest.Emulator, c *dynamodb.Client, transactional bool) (*runs.DynamoRuns, idem.Store) {
	t.Helper()
	rs := &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable"), Transactional: transactional}
	st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
	if err != nil {
		t.Fatal(err)
	}
	return rs, st
}
