package kit

import (
	"fmt"
	"time"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemenv"
)

// runRetentionNeedsTransaction refuses a finite run retention
// (RUN_RETENTION_DAYS) under a Layer-1 retention of forever (the commerce
// policy's) where createRun does not write its run in the Layer-1
// completion transaction (RUNS_TRANSACTIONAL=false, or Layer 1 in another
// region under fenced-effects). There a record whose completion was lost
// after its run was written stays claimable forever, and its
// re-execution names the same run (runs.ClaimRunID): once the run has
// expired nothing would stop the create from landing a second time. With
// the transaction the run exists only once the record is completed, and a
// completed record only replays. settings.LoadEnv checks the finite
// Layer-1 retentions; only the wiring knows whether the transaction is
// used. p.Guard false (the executor) creates no run under a record.
func runRetentionNeedsTransaction(env settings.Env, p Parts, transactional bool) error {
	if !p.Guard || env.RunRetention <= 0 || env.Idem.EffectiveRetention() != idem.Forever || transactional {
		return nil
	}
	return fmt.Errorf("%s=%d with a Layer-1 retention of forever (%s, policy %s) needs createRun's run written in the Layer-1 completion transaction (%s=true, Layer 1 in this region): set %s to 0 (forever) or give Layer 1 a finite retention",
		settings.EnvRunRetention, int(env.RunRetention/(24*time.Hour)), idemenv.RetentionHours, env.Idem.PolicyName(),
		"RUNS_TRANSACTIONAL", settings.EnvRunRetention)
}
