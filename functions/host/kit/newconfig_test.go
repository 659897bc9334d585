package kit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/kit"
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
