package conflictaudit_test

import (
	"errors"
	"testing"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
)

// New's error for an invalid Config matches ErrConfig.
func TestNewReportsEveryConfigProblem(t *testing.T) {
	_, err := conflictaudit.New(conflictaudit.Config{Strategy: "single-region"})
	want := "conflictaudit: Config.Strategy must be reconciled-records or fenced-effects"
	if err == nil || err.Error() != want || !errors.Is(err, conflictaudit.ErrConfig) {
		t.Fatalf("New = %v (errors.Is ErrConfig: %v), want %q", err, errors.Is(err, conflictaudit.ErrConfig), want)
	}
}
