package kit

import (
	"fmt"
	"time"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemenv"
)

// runRetentionNeedsTransaction refuses a finite run retention
// (RUN_RETENTION_DAYS) where createRun does not write its run in the
// Layer-1 completion transaction (RUNS_TRANSACTIONAL=false, or Layer 1 and
// the runs in different regions), whatever the Layer-1 retention.
// There a record whose execution fails after its run was written (a lost
// answer, a throttled read) stays claimable, and its re-execution names
// the same run (runs.ClaimRunID): the run's item is then the only fence
// against a second create. A record is kept its retention after its last
// claim, and each reclaim is a claim, so a record whose executions keep
// failing can outlive any run retention (under a forever Layer-1 retention
// at once; under a finite one by a chain of reclaims, each within the
// record's retention of the one before, the later ones after the run
// ended), and once the run has expired its create lands a second time and
// its workflow runs again. With the transaction the run exists only once
// the record is completed, and a completed record only replays.
// settings.LoadEnv checks the retention bounds; only the wiring knows
// whether the transaction is used. p.Guard false (the executor) creates no
// run under a record, nor does an api with Layer 1 off (IDEMPOTENCY_ENABLED
// false: every run id is new).
func runRetentionNeedsTransaction(env settings.Env, p Parts, transactional bool) error {
	if !p.Guard || !env.Idem.Enabled || env.RunRetention <= 0 || transactional {
		return nil
	}
	days := int(env.RunRetention / (24 * time.Hour))
	if env.Idem.EffectiveRetention() == idem.Forever {
		return fmt.Errorf("%s=%d with a Layer-1 retention of forever (%s, policy %s) needs createRun's run written in the Layer-1 completion transaction (%s=true, Layer 1 and the runs in one region): set %s to 0 (forever)",
			settings.EnvRunRetention, days, idemenv.RetentionHours, env.Idem.PolicyName(),
			"RUNS_TRANSACTIONAL", settings.EnvRunRetention)
	}
	return fmt.Errorf("%s=%d needs createRun's run written in the Layer-1 completion transaction (%s=true, Layer 1 and the runs in one region): without it a Layer-1 record whose executions keep failing after the run write is reclaimed, and kept, past the run's expiry, and would create the run again; set %s to 0 (forever)",
		settings.EnvRunRetention, days, "RUNS_TRANSACTIONAL", settings.EnvRunRetention)
}

// unwrittenCancelKept is how long a cancel's marker is kept where no run
// is created under a Layer-1 record (markerRetention): a day, far past
// the longest an api request lives (its Lambda timeout, at most 15
// minutes), during which the request that listed a retry may still write
// its run.
const unwrittenCancelKept = 24 * time.Hour

// markerRetention is runs.DynamoRuns.MarkerRetention for env: a cancel
// answered 404 without the transaction writes a marker at the id, so that
// a retry listed there and not yet written is written cancelled (RED_TEAM
// 345). With Layer 1 off (IDEMPOTENCY_ENABLED false) every run id is new:
// only the request that listed the id writes its run, so the marker is
// needed only while that request lives, and expires after
// unwrittenCancelKept (RED_TEAM 370). With Layer 1 on it is kept forever
// (0): a record re-executes its retry under the same run id for as long as
// it is kept, and each reclaim of a record whose executions keep failing
// before the run's write prolongs that (runRetentionNeedsTransaction), so
// a marker expiring at the cancel's time + the Layer-1 retention could be
// gone when the re-execution that writes the run comes, and the run cancelled
// would be written pending. Under the transaction no marker is written.
func markerRetention(env settings.Env, transactional bool) time.Duration {
	if transactional || env.Idem.Enabled {
		return 0
	}
	return unwrittenCancelKept
}
