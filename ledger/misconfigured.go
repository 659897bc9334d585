package ledger

import (
	"context"
	"errors"
	"log/slog"
)

// storeChecked returns err as it is; when it says the store's table is
// missing or has another key schema (ErrStoreMisconfigured), the call is
// counted (MetricStoreMisconfigured) and, the first time for this Ledger,
// the problem and its fix are logged.
func (l *Ledger) storeChecked(ctx context.Context, err error) error {
	if !errors.Is(err, ErrStoreMisconfigured) {
		return err
	}
	if l.cfg.Metrics != nil {
		l.cfg.Metrics.Count(MetricStoreMisconfigured, 1, nil)
	}
	if l.storeWarned.CompareAndSwap(false, true) {
		l.cfg.Logger.LogAttrs(ctx, slog.LevelError,
			"ledger: the effects store's table is missing or has another key schema; no effect fires until it is fixed: "+
				"point the store at the table created from template.yaml's EffectsTable (EFFECTS_TABLE), or create it "+
				"(idemkit tables create), and run idemkit doctor to see how the deployed table differs",
			slog.String("error", err.Error()))
	}
	return err
}
