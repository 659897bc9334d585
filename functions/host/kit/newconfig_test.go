package kit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
)

// NewKit reports every missing table at once, in one error that matches
// ErrConfig and, through it, settings.ErrConfig.
func TestNewReportsEveryConfigProblem(t *testing.T) {
	_, err := kit.NewKit(kit.Config{Env: settings.Env{}, Parts: kit.Parts{Runs: true, Ledger: true}})
	want := "kit: host: missing environment: RUNS_TABLE, EFFECTS_TABLE"
	if err == nil || err.Error() != want || !errors.Is(err, kit.ErrConfig) || !errors.Is(err, settings.ErrConfig) {
		t.Fatalf("NewKit = %v (errors.Is kit.ErrConfig: %v, settings.ErrConfig: %v), want %q",
			err, errors.Is(err, kit.ErrConfig), errors.Is(err, settings.ErrConfig), want)
	}
}

// A finite run retention under a Layer-1 retention of forever (the
// commerce policy) is refused where createRun's run is not written in the
// Layer-1 completion transaction: a record left claimable forever would
// re-create its run once the run expired. With the transaction, or for the
// executor (which creates no run under a record), it is accepted.
func TestNewRefusesRunRetentionWithoutTheTransaction(t *testing.T) {
	env, err := settings.LoadEnv(settings.Values(map[string]string{
		settings.EnvRunsTable: "runs", "IDEMPOTENCY_TABLE": "idem", "IDEMPOTENCY_POLICY": "commerce",
		settings.EnvRunRetention: "30", "RUNS_TRANSACTIONAL": "false"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = kit.NewKit(kit.Config{Env: env, Parts: kit.Parts{Runs: true, Guard: true}})
	if !errors.Is(err, kit.ErrConfig) || !strings.Contains(err.Error(), "RUN_RETENTION_DAYS=30 with a Layer-1 retention of forever") ||
		!strings.Contains(err.Error(), "RUNS_TRANSACTIONAL=true") {
		t.Fatalf("NewKit = %v, want the run retention refused without the transaction", err)
	}
	if _, err := kit.NewKit(kit.Config{Env: env, Parts: kit.Parts{Runs: true}}); err != nil {
		t.Fatalf("the executor's parts: %v, want accepted", err)
	}
	env.Transactional = true
	if _, err := kit.NewKit(kit.Config{Env: env, Parts: kit.Parts{Runs: true, Guard: true}}); err != nil && strings.Contains(err.Error(), "RUN_RETENTION_DAYS") {
		t.Fatalf("with the transaction: %v, want the run retention accepted", err)
	}
}

// Under fenced-effects the fence keeps a passed token at least as long as
// the ledger keeps the effect record (an escaped effect is never fired
// again while its record says so): a ledger retention longer than the
// fence's default is accepted, the fence's retention following it
// (ledger.New refuses a fence that keeps less).
func TestFencedKitKeepsTheFenceAsLongAsTheLedger(t *testing.T) {
	for _, days := range []string{"14", "30", "400"} {
		env, err := settings.LoadEnv(settings.Values(map[string]string{
			settings.EnvRunsTable: "runs", "EFFECTS_TABLE": "effects", "FENCE_TABLE": "fence",
			"CROSS_REGION": "fenced-effects", "FENCE_TABLE_REGION": "eu-west-1", "EFFECT_RETENTION_DAYS": days}))
		if err != nil {
			t.Fatal(err)
		}
		client := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
		if _, err := kit.NewKit(kit.Config{Env: env, Client: client, Parts: kit.Parts{Runs: true, Ledger: true}}); err != nil {
			t.Fatalf("EFFECT_RETENTION_DAYS=%s: %v", days, err)
		}
	}
}

// A fenced replica region's api (its Layer 1 in the home region) without
// RUNS_TABLE_REGION is refused: its runs would be readable in its own
// region only, while the deployment advertises reads visible everywhere
// after the lag bound. The home region's api, and a replica's executor,
// need no such setting.
func TestFencedReplicaAPINeedsTheRunsTableRegion(t *testing.T) {
	vars := map[string]string{settings.EnvRunsTable: "runs", "IDEMPOTENCY_TABLE": "idem", "EFFECTS_TABLE": "effects", "FENCE_TABLE": "fence",
		"CROSS_REGION": "fenced-effects", "FENCE_TABLE_REGION": "eu-west-1"}
	env, err := settings.LoadEnv(settings.Values(vars))
	if err != nil {
		t.Fatal(err)
	}
	in := func(region string) *dynamodb.Client { return dynamodb.New(dynamodb.Options{Region: region}) }
	_, err = kit.NewKit(kit.Config{Env: env, Client: in("us-east-1"), Parts: kit.Parts{Runs: true, Guard: true}})
	if !errors.Is(err, kit.ErrConfig) || !strings.Contains(err.Error(), "needs RUNS_TABLE_REGION=eu-west-1") {
		t.Fatalf("replica api without RUNS_TABLE_REGION: %v", err)
	}
	for name, c := range map[string]kit.Config{
		"home api":         {Env: env, Client: in("eu-west-1"), Parts: kit.Parts{Runs: true, Guard: true}},
		"replica executor": {Env: env, Client: in("us-east-1"), Parts: kit.Parts{Runs: true, Ledger: true}},
	} {
		if _, err := kit.NewKit(c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	vars[settings.EnvRunsTableRegion] = "eu-west-1"
	if env, err = settings.LoadEnv(settings.Values(vars)); err != nil {
		t.Fatal(err)
	}
	k, err := kit.NewKit(kit.Config{Env: env, Client: in("us-east-1"), Parts: kit.Parts{Runs: true, Guard: true}})
	if err != nil {
		t.Fatalf("replica api with RUNS_TABLE_REGION: %v", err)
	}
	r := k.Runs.(*runs.DynamoRuns)
	if c, ok := r.Client.(*dynamodb.Client); !ok || c.Options().Region != "eu-west-1" || !r.Transactional {
		t.Fatalf("replica api's runs: client %T, transactional %v; want the home region's, in the record's transaction", r.Client, r.Transactional)
	}
}
