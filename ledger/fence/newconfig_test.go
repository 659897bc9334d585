package fence_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger/fence"
)

// New reports every problem of a Config at once, in one error that
// matches ErrConfig.
func TestNewReportsEveryConfigProblem(t *testing.T) {
	_, err := fence.New(fence.Config{Retention: time.Hour})
	want := "fence: Config.Store is required; Config.Retention 1h0m0s is below the ledger's 14-day minimum"
	if err == nil || err.Error() != want || !errors.Is(err, fence.ErrConfig) {
		t.Fatalf("New = %v (errors.Is ErrConfig: %v), want %q", err, errors.Is(err, fence.ErrConfig), want)
	}
}
