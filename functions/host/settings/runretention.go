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
//     when finite: the key that created a run replays its answer, naming
//     the run, for that retention after the run was written (with the
//     completion record, as kit requires under a run retention).
//
// A Layer-1 retention of forever (the commerce policy's) is not compared.
// Neither bound keeps a run's create from running twice: a record whose
// executions keep failing after the run write is reclaimed, restarting
// its retention, past any run retention, and its re-execution names the
// same run (runs.ClaimRunID). kit.NewKit therefore refuses any finite run
// retention where createRun does not write its run in the Layer-1
// completion transaction (RUNS_TRANSACTIONAL): with it the run exists
// only once the record is completed, and a completed record only replays.
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
