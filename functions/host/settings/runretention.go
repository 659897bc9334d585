package settings

import (
	"fmt"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemenv"
)

// runRetentionProblems checks RUN_RETENTION_DAYS against the retentions an
// ended run must outlive. A finite run retention is refused when it is
// shorter than:
//
//   - EFFECT_RETENTION_DAYS: the effects witness (GET /runs/{runId}/effects)
//     is asked of a run; a run that vanished while its effect records are
//     still kept would answer 404 for effects the ledger still holds.
//   - the Layer-1 retention (IDEMPOTENCY_RETENTION_HOURS, or the policy's),
//     when finite: a run's item is what fences its create against running
//     twice (a re-execution of the Layer-1 record that created it names
//     the same run, runs.ClaimRunID). A record is kept its retention after
//     its last write, which is before the run's end, so a run kept at
//     least as long outlives every re-execution of its create.
//
// A Layer-1 retention of forever (the commerce policy's) is not compared:
// a run written in the record's completion transaction (RUNS_TRANSACTIONAL,
// the default) exists only once the record is completed, and a completed
// record only replays. kit.NewKit refuses a finite run retention with a
// forever Layer-1 retention where createRun does not use that transaction.
func (e *Env) runRetentionProblems() []string {
	if e.RunRetention <= 0 {
		return nil
	}
	var p []string
	days := int(e.RunRetention / (24 * time.Hour))
	if e.RunRetention < e.EffectRetention {
		p = append(p, fmt.Sprintf("%s=%d is below %s=%d: a run must be kept at least as long as its effect records (GET /runs/{runId}/effects); set %s to 0 (forever) or at least %d",
			EnvRunRetention, days, envEffectRetention, int(e.EffectRetention/(24*time.Hour)), EnvRunRetention, int(e.EffectRetention/(24*time.Hour))))
	}
	if l1 := e.Idem.EffectiveRetention(); l1 != idem.Forever && l1 > 0 && e.RunRetention < l1 {
		need := int((l1 + 24*time.Hour - 1) / (24 * time.Hour))
		p = append(p, fmt.Sprintf("%s=%d is below the Layer-1 retention (%s, policy %s: %d hours): a run must outlive the Layer-1 record that created it; set %s to 0 (forever) or at least %d",
			EnvRunRetention, days, idemenv.RetentionHours, e.Idem.PolicyName(), int(l1/time.Hour), EnvRunRetention, need))
	}
	return p
}
