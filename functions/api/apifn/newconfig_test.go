package apifn

import (
	"errors"
	"testing"
)

// New reports every missing dependency at once, in one error that matches
// ErrConfig.
func TestNewReportsEveryConfigProblem(t *testing.T) {
	_, err := New(Config{})
	want := "apifn: Config.Runs is required; Config.Guard is required; Config.Ledger is required"
	if err == nil || err.Error() != want || !errors.Is(err, ErrConfig) {
		t.Fatalf("New = %v (errors.Is ErrConfig: %v), want %q", err, errors.Is(err, ErrConfig), want)
	}
}
