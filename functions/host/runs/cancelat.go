package runs

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
)

// VersionCanceller is a run store whose cancel can be conditional on the
// run's version, for a cancel decided against what its caller read of the
// run. MemRuns and DynamoRuns implement it.
type VersionCanceller interface {
	// CancelAt is Cancel of a pending, running or paused run that is
	// still at version v (the version its caller read and checked), in
	// the same conditional write: any change of the run's version since
	// (a pause and a resume leaving the status as read included) refuses
	// it, ErrStatusConflict with the run as it is; ErrRunNotFound when
	// there is none. It never records a cancel at an id no run holds.
	CancelAt(ctx context.Context, id string, v int64, by, reason string, now time.Time) (Run, error)
}

var (
	_ VersionCanceller = (*MemRuns)(nil)
	_ VersionCanceller = (*DynamoRuns)(nil)
)

// cancellable reports whether a cancel moves a run in s: live or paused.
func cancellable(s Status) bool { return live(s) || s == StatusPaused }

// CancelAt implements VersionCanceller.
func (m *MemRuns) CancelAt(_ context.Context, id string, v int64, by, reason string, now time.Time) (Run, error) {
	return m.transitionIf(id, func(r Run) bool { return r.Version == v && cancellable(r.Status) }, StatusCancelled, "", by, reason, now)
}

// CancelAt implements VersionCanceller: Cancel's one conditional
// UpdateItem, its condition also naming the version.
func (d *DynamoRuns) CancelAt(ctx context.Context, id string, v int64, by, reason string, now time.Time) (Run, error) {
	return d.transitionIf(ctx, id, []Status{StatusPending, StatusRunning, StatusPaused}, versionIs(v), StatusCancelled, "", by, reason, now)
}

// versionIs is the condition that the run's version is v (a run stored
// before versions were kept has none: version 0).
func versionIs(v int64) expression.ConditionBuilder {
	is := expression.Name(runAttrVersion).Equal(expression.Value(v))
	if v == 0 {
		return expression.AttributeNotExists(expression.Name(runAttrVersion)).Or(is)
	}
	return is
}
