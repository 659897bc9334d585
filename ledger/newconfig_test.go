package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// New reports every problem of a Config at once, in one error that
// matches ErrConfig.
func TestNewReportsEveryConfigProblem(t *testing.T) {
	_, err := ledger.New(ledger.Config{Lease: time.Millisecond, MaxAttempts: ledger.MaxMaxAttempts + 1})
	want := "ledger: Config.Store is required; Config.Lease 1ms is below 1s; Config.MaxAttempts 501 is outside 1..500"
	if err == nil || err.Error() != want || !errors.Is(err, ledger.ErrConfig) {
		t.Fatalf("New = %v (errors.Is ErrConfig: %v), want %q", err, errors.Is(err, ledger.ErrConfig), want)
	}
}

// A lease at or past the retention is refused: a claim's lease would
// outlive its record, and once the record expired a new claim would fire
// the effect again while the first owner's call still ran.
func TestNewRefusesALeaseAsLongAsTheRetention(t *testing.T) {
	_, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: ledger.MinRetention, Heartbeat: -1})
	want := "ledger: Config.Lease 336h0m0s is not below Config.Retention 336h0m0s"
	if err == nil || err.Error() != want || !errors.Is(err, ledger.ErrConfig) {
		t.Fatalf("New = %v, want %q", err, want)
	}
}
