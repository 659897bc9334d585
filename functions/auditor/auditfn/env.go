package auditfn

import (
	"errors"
	"log/slog"
	"strings"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/internal/configerr"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/ledger/fence"
)

// EnvRegion is the variable the Lambda runtime sets to the function's
// region; conflict events and the conflict counter's "region" dimension
// carry it (the region whose stream the auditor reads).
const EnvRegion = "AWS_REGION"

// NewFromEnv returns the auditor the function runs, configured through
// getenv (os.Getenv in Lambda):
//
//   - CROSS_REGION (settings.EnvCrossRegion): single-region (default),
//     reconciled-records or fenced-effects. Anything else is an error. When
//     it is not single-region the cross-region conflict audit is on, with
//     that posture as the events' strategy;
//   - AWS_REGION: the region recorded on conflict events. Required when
//     the conflict audit is on (Lambda always sets it).
//   - IDEMPOTENCY_KEY_HASH_SECRET (idemenv.KeyHashSecret): the secret the
//     references of conflict events and the auditor's lines (effect ids,
//     owner tokens, record ids) are hashed with, the api's: the same on
//     every region's stack names one record alike in every region. Unset:
//     a random salt per process, as the api without it.
//
// metrics and logger are used as given (nil metrics: none; nil logger:
// slog.Default()). An error lists every problem and matches ErrConfig.
func NewFromEnv(getenv func(string) string, metrics *emf.Recorder, logger *slog.Logger) (*Auditor, error) {
	a := &Auditor{Metrics: metrics, Logger: logger, KeyHashSecret: getenv(idemenv.KeyHashSecret)}
	var p configerr.List
	posture := crossRegion(getenv)
	region := strings.TrimSpace(getenv(EnvRegion))
	switch {
	case !posture.Valid():
		p.Addf("%s=%q: want single-region, reconciled-records or fenced-effects", settings.EnvCrossRegion, posture)
	case posture == fence.SingleRegion:
	case region == "":
		p.Addf("%s=%s needs %s (the region whose stream is audited)", settings.EnvCrossRegion, posture, EnvRegion)
	default:
		c, err := conflictaudit.New(conflictaudit.Config{Strategy: posture, Region: region, Metrics: metrics, Log: a.log(),
			KeyHashSecret: a.KeyHashSecret})
		p.Wrap(err)
		a.Conflicts = c
	}
	if err := p.Err("auditfn", ErrConfig); err != nil {
		return nil, err
	}
	return a, nil
}

// ErrConfig is matched (errors.Is) by every error NewFromEnv returns.
var ErrConfig = errors.New("auditfn: invalid config")

// WriteBackTables returns the tables the auditor configured through getenv
// writes back into: under reconciled-records, read as NewFromEnv reads it
// (surrounding space trimmed, so a posture NewFromEnv takes for
// reconciled-records never runs the conflict audit without its
// write-backs), IDEMPOTENCY_TABLE for a Layer-1 conflict's winner
// (TableRestorer) and EFFECTS_TABLE for a completed effect record the
// other region's claim replaced without an outcome (EffectTableRestorer),
// each trimmed and "" when unset. Under any other posture both are "":
// fenced-effects has one owner, single-region no other region.
func WriteBackTables(getenv func(string) string) (idempotency, effects string) {
	if crossRegion(getenv) != fence.ReconciledRecords {
		return "", ""
	}
	return strings.TrimSpace(getenv(idemenv.Table)), strings.TrimSpace(getenv(settings.EnvEffectsTable))
}

// crossRegion is CROSS_REGION as the auditor reads it, for NewFromEnv and
// WriteBackTables alike: surrounding space trimmed, single-region when
// unset (not validated here).
func crossRegion(getenv func(string) string) fence.CrossRegion {
	if p := fence.CrossRegion(strings.TrimSpace(getenv(settings.EnvCrossRegion))); p != "" {
		return p
	}
	return fence.SingleRegion
}
