package configerr_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/idemkit/idemkit/internal/configerr"
)

var (
	errPkg   = errors.New("pkg: invalid config")
	errOther = errors.New("other: invalid config")
)

func TestEmptyListIsNoError(t *testing.T) {
	var l configerr.List
	l.Wrap(nil)
	if err := l.Err("pkg", errPkg); err != nil || l.Len() != 0 {
		t.Fatalf("empty list: Err = %v, Len = %d", err, l.Len())
	}
}

// Every problem is listed, in order; the error matches its sentinel and
// every wrapped cause, and no other sentinel.
func TestErrorListsEveryProblemAndMatchesItsSentinel(t *testing.T) {
	cause := (&configerr.List{})
	cause.Addf("Config.Table is required")
	inner := cause.Err("other", errOther)

	var l configerr.List
	l.Addf("Config.Store is required")
	l.Addf("Config.Lease %d is below %d", 0, 1)
	l.Wrap(inner)
	err := l.Err("pkg", errPkg)
	if got, want := err.Error(), "pkg: Config.Store is required; Config.Lease 0 is below 1; other: Config.Table is required"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, errPkg) || !errors.Is(err, errOther) || errors.Is(err, errors.New("pkg: invalid config")) {
		t.Errorf("errors.Is: pkg %v, wrapped %v", errors.Is(err, errPkg), errors.Is(err, errOther))
	}
	var e *configerr.Error
	if !errors.As(err, &e) || !reflect.DeepEqual(e.Problems(), []string{"Config.Store is required", "Config.Lease 0 is below 1", "other: Config.Table is required"}) {
		t.Errorf("Problems() = %q", e.Problems())
	}
	l.Addf("later")
	if len(e.Problems()) != 3 {
		t.Errorf("a later Addf changed an error already returned: %q", e.Problems())
	}
}
