package auditfn

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/settings"
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
//
// metrics and logger are used as given (nil metrics: none; nil logger:
// slog.Default()).
func NewFromEnv(getenv func(string) string, metrics *emf.Recorder, logger *slog.Logger) (*Auditor, error) {
	a := &Auditor{Metrics: metrics, Logger: logger}
	posture := fence.CrossRegion(strings.TrimSpace(getenv(settings.EnvCrossRegion)))
	if posture == "" {
		posture = fence.SingleRegion
	}
	if !posture.Valid() {
		return nil, fmt.Errorf("auditfn: %s=%q: want single-region, reconciled-records or fenced-effects", settings.EnvCrossRegion, posture)
	}
	if posture == fence.SingleRegion {
		return a, nil
	}
	region := strings.TrimSpace(getenv(EnvRegion))
	if region == "" {
		return nil, fmt.Errorf("auditfn: %s=%s needs %s (the region whose stream is audited)", settings.EnvCrossRegion, posture, EnvRegion)
	}
	c, err := conflictaudit.New(conflictaudit.Config{Strategy: posture, Region: region, Metrics: metrics, Log: a.log()})
	if err != nil {
		return nil, err
	}
	a.Conflicts = c
	return a, nil
}
