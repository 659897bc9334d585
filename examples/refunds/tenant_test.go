package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// The worker refunds for the tenant of its configuration (TENANT: the
// tenant whose queue it reads), never for a tenant a message names: whoever
// may send to the queue could name any. A message whose body names another
// tenant is refused (reported failed, so it reaches the dead-letter queue)
// and records nothing under either tenant; one naming no tenant, or the
// worker's own, is refunded as the worker's tenant (RED_TEAM 491). The
// tenant is not store behaviour: the memory store is enough.
func TestWorkerActsOnlyAsItsConfiguredTenant(t *testing.T) {
	l, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	logs := captureLog(t)
	order := fmt.Sprintf("order-%d", time.Now().UnixNano())
	batch := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-other", Body: `{"tenant":"globex","order":"` + order + `-a","amount":5}`},
		{MessageId: "m-none", Body: `{"order":"` + order + `-b","amount":5}`},
		{MessageId: "m-own", Body: `{"tenant":"acme","order":"` + order + `-c","amount":5}`},
	}}
	before := refunds.Load()
	if got := failedIDs(handle(context.Background(), l, "acme", batch)); !slices.Equal(got, []string{"m-other"}) {
		t.Fatalf("batchItemFailures %v, want [m-other] (a body naming another tenant)", got)
	}
	if n := refunds.Load() - before; n != 2 {
		t.Fatalf("the provider was called %d times, want 2 (m-none, m-own)", n)
	}
	// recorded reports whether (tenant, refund, key) has a record: a Do
	// whose function runs found none.
	recorded := func(tenant, key string) bool {
		id, err := identity.FromBusiness(identity.Business{Tenant: tenant, Operation: "refund", Key: key})
		if err != nil {
			t.Fatal(err)
		}
		ran := false
		_, _ = l.Do(context.Background(), ledger.Effect{Identity: id}, func(context.Context, ledger.Call) ([]byte, error) {
			ran = true
			return []byte(`{}`), nil
		})
		return !ran
	}
	if recorded("globex", order+"-a") || recorded("acme", order+"-a") {
		t.Fatal("the message naming another tenant recorded a refund")
	}
	if !recorded("acme", order+"-b") || !recorded("acme", order+"-c") {
		t.Fatal("the worker's own refunds are not recorded under its tenant")
	}
	if out := logs.String(); !strings.Contains(out, "message m-other: ") || strings.Contains(out, "globex") || strings.Contains(out, order) {
		t.Fatalf("the log does not name m-other's failure, or names a tenant or an order:\n%s", out)
	}
}

// Start-up needs TENANT: without it the worker would have no tenant of its
// own, and no default can serve (a fixed name would make every worker
// deployed without it one tenant).
func TestWorkerNeedsItsTenant(t *testing.T) {
	t.Setenv("TENANT", "")
	if _, err := tenantFromEnv(); err == nil || !strings.Contains(err.Error(), "TENANT") {
		t.Fatalf("without TENANT: err = %v", err)
	}
	t.Setenv("TENANT", "acme")
	if got, err := tenantFromEnv(); err != nil || got != "acme" {
		t.Fatalf("TENANT=acme: %q, %v", got, err)
	}
}
