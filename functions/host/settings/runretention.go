package settings

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemenv"
)

// raiseRunRetention checks RUN_RETENTION_DAYS against the retentions an
// ended run must outlive. A finite run retention shorter than one of them
// is raised to the longest, in whole days, and said as a configuration
// warning (Env.Warnings: kit.Boot logs it at every cold start, and
// STACK-configuration-warnings pages it) naming the settings and the value
// to set:
//
//   - EFFECT_RETENTION_DAYS: the effects witness (GET /runs/{runId}/effects)
//     is asked of a run; a run that vanished while its effect records are
//     still kept would answer 404 for effects the ledger still holds.
//   - the Layer-1 retention (IDEMPOTENCY_RETENTION_HOURS, or the policy's),
//     when finite: the key that created a run replays its answer, naming
//     the run, for that retention after the run was written (with the
//     completion record, as kit requires under a run retention).
//
// Raised, not refused: the template cannot refuse such a pair at deploy
// (CloudFormation's rules compare text, never numbers), and a refusal at
// start-up stopped the api and executor at every cold start, so the stack
// served nothing until the next deploy (RED_TEAM 546). The raised value is
// never longer than a retention the operator set (or the policy's default
// they chose), and only keeps ended runs longer.
//
// A Layer-1 retention of forever (the commerce policy's) is not compared.
// Neither bound keeps a run's create from running twice: a record whose
// executions keep failing after the run write is reclaimed, restarting
// its retention, past any run retention, and its re-execution names the
// same run (runs.ClaimRunID). kit.NewKit therefore refuses any finite run
// retention where createRun does not write its run in the Layer-1
// completion transaction (RUNS_TRANSACTIONAL): with it the run exists
// only once the record is completed, and a completed record only replays.
func (e *Env) raiseRunRetention() {
	if e.RunRetention <= 0 {
		return
	}
	const day = 24 * time.Hour
	var why []string
	floor := e.RunRetention
	if e.RunRetention < e.EffectRetention {
		why = append(why, fmt.Sprintf("below %s=%d: a run must be kept at least as long as its effect records (GET /runs/{runId}/effects)",
			envEffectRetention, int(e.EffectRetention/day)))
		floor = e.EffectRetention
	}
	if l1 := e.Idem.EffectiveRetention(); l1 != idem.Forever && l1 > 0 && e.RunRetention < l1 {
		why = append(why, fmt.Sprintf("below the Layer-1 retention (%s, policy %s: %d hours): a run must outlive the Layer-1 record that created it",
			idemenv.RetentionHours, e.Idem.PolicyName(), int(l1/time.Hour)))
		floor = max(floor, l1)
	}
	if len(why) == 0 {
		return
	}
	asked := int(e.RunRetention / day)
	// Whole days, unless that would pass the longest duration (a Layer-1
	// retention within a day of it): then the retention itself.
	need := int64(floor / day)
	if floor%day != 0 {
		need++
	}
	if need <= int64(math.MaxInt64/int64(day)) {
		floor = time.Duration(need) * day
	}
	e.RunRetention = floor
	e.Warnings = append(e.Warnings, fmt.Sprintf("%s=%d is %s; ended runs are kept %d days instead: set %s to 0 (forever) or at least %d",
		EnvRunRetention, asked, strings.Join(why, ", and "), need, EnvRunRetention, need))
}
