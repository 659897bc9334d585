package kit_test

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
)

// A finite run retention is refused, whatever the Layer-1 retention, where
// createRun's run is not written in the Layer-1 completion transaction.
// There every reclaim of a record whose executions keep failing after the
// run write (a lost answer, a throttled read) re-executes the create and
// writes the record again, moving its retention end past the run's: under
// the ERP policy (720 hours) and RUN_RETENTION_DAYS=30, a run created and
// ended on day 0, its key retried on day 29 (failing again) and on day 59,
// is created a second time under the same runId on day 59, its workflow
// executed again. With the transaction the run exists only once the
// record is completed, which then only replays; the executor creates no
// run under a record.
func TestNewRefusesFiniteRunRetentionWithoutTheTransaction(t *testing.T) {
	for _, c := range []struct{ name, policy, days string }{
		{"the ERP policy", "erp", "30"},
		{"the OpenWOP policy", "openwop", "14"},
	} {
		t.Run(c.name, func(t *testing.T) {
			env, err := settings.LoadEnv(settings.Values(map[string]string{
				settings.EnvRunsTable: "runs", "IDEMPOTENCY_TABLE": "idem", "IDEMPOTENCY_POLICY": c.policy,
				settings.EnvRunRetention: c.days, "RUNS_TRANSACTIONAL": "false"}))
			if err != nil {
				t.Fatal(err)
			}
			_, err = kit.NewKit(kit.Config{Env: env, Parts: kit.Parts{Runs: true, Guard: true}})
			if !errors.Is(err, kit.ErrConfig) || !strings.Contains(err.Error(), "RUN_RETENTION_DAYS="+c.days) ||
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
		})
	}
}

// With Layer 1 off (IDEMPOTENCY_ENABLED=false) no run is created under a
// record (every run id is new), so a finite run retention needs no
// transaction.
func TestNewAcceptsRunRetentionWithLayerOneOff(t *testing.T) {
	env, err := settings.LoadEnv(settings.Values(map[string]string{
		settings.EnvRunsTable: "runs", "IDEMPOTENCY_TABLE": "idem", "IDEMPOTENCY_ENABLED": "false",
		settings.EnvRunRetention: "30", "RUNS_TRANSACTIONAL": "false"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kit.NewKit(kit.Config{Env: env, Parts: kit.Parts{Runs: true, Guard: true}}); err != nil {
		t.Fatalf("NewKit = %v, want accepted", err)
	}
}

// A cancel's marker (a cancel answered 404 without the transaction, so a
// retry listed and not yet written is written cancelled) expires a day
// after the cancel only with Layer 1 off, where every run id is new and
// only the request that listed the id writes its run (RED_TEAM 370). With
// Layer 1 on it is kept forever under every policy, finite retention or
// not: each reclaim of a record whose executions keep failing before the
// run's write prolongs the record, so a marker expiring at the cancel's
// time + the Layer-1 retention could be gone when the re-execution that
// writes the run comes. Under the transaction no marker is written.
func TestCancelMarkerExpiresOnlyWithLayerOneOff(t *testing.T) {
	for _, c := range []struct {
		name string
		vars map[string]string
		want time.Duration
	}{
		{"Layer 1 off, no transaction", map[string]string{"IDEMPOTENCY_ENABLED": "false", "RUNS_TRANSACTIONAL": "false"}, 24 * time.Hour},
		{"Layer 1 off, the transaction", map[string]string{"IDEMPOTENCY_ENABLED": "false"}, 0},
		{"the OpenWOP policy (24 h)", map[string]string{"RUNS_TRANSACTIONAL": "false"}, 0},
		{"the ERP policy (720 h)", map[string]string{"IDEMPOTENCY_POLICY": "erp", "RUNS_TRANSACTIONAL": "false"}, 0},
		{"the commerce policy (forever)", map[string]string{"IDEMPOTENCY_POLICY": "commerce", "RUNS_TRANSACTIONAL": "false"}, 0},
		{"IDEMPOTENCY_RETENTION_HOURS=48", map[string]string{"IDEMPOTENCY_RETENTION_HOURS": "48", "RUNS_TRANSACTIONAL": "false"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			vars := map[string]string{settings.EnvRunsTable: "runs", "IDEMPOTENCY_TABLE": "idem"}
			maps.Copy(vars, c.vars)
			env, err := settings.LoadEnv(settings.Values(vars))
			if err != nil {
				t.Fatal(err)
			}
			k, err := kit.NewKit(kit.Config{Env: env, Parts: kit.Parts{Runs: true, Guard: true}})
			if err != nil {
				t.Fatal(err)
			}
			d, ok := k.Runs.(*runs.DynamoRuns)
			if !ok {
				t.Fatalf("the kit's runs are a %T", k.Runs)
			}
			if d.MarkerRetention != c.want {
				t.Fatalf("MarkerRetention %v (transactional %v), want %v", d.MarkerRetention, d.Transactional, c.want)
			}
		})
	}
}
