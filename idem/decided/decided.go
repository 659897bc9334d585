// Package decided is the offline-decision check of Layer 1: a write queued
// offline carries the version of the record it was decided against
// (Header), and runs only when the record's changes since then touch none
// of the operation's declared inputs (Checker); otherwise it is answered
// 409 CodeStale with the changed fields (StaleError).
package decided

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/header"
)

// Header carries the version of the record a write was decided against: a
// client that queued the write offline sends it later with its
// Idempotency-Key and this header (a decimal version, 1 or more). The write
// runs only when the record's changes since that version touch none of the
// operation's declared inputs (see Checker). A request without the header
// is not checked.
//
// The header is not part of the request fingerprint: the key binds the
// write, and a duplicate with the same key replays the first answer (a
// refusal included) whatever version it carries.
const Header = "Idempotency-Decided-Version"

// CodeStale is the error code of a write refused because the record
// changed, since the version it was decided against, in a field the
// operation decides on (HTTP 409; a vendor code: the OpenWOP registry has
// no row for it).
const CodeStale = "idemkit.stale_decision"

// The errors of the offline-decision check, matched with errors.Is.
var (
	// ErrVersionInvalid is returned by ParseVersion for a value that is
	// not a decimal version of 1 or more.
	ErrVersionInvalid = errors.New("decided: " + Header + " is not a decimal version of 1 or more")
	// ErrRecordNotFound is returned by a History when the caller's scope
	// has no record with the id.
	ErrRecordNotFound = errors.New("decided: record not found")
	// ErrVersionAhead is returned by a History (and Checker.Check) when the
	// decided version is one the record never had: below 1 or above its
	// current version.
	ErrVersionAhead = errors.New("decided: decided version is not a version of the record")
)

// maxVersionDigits bounds the header so that every accepted value fits an
// int64 and a JSON number.
const maxVersionDigits = 15

// ParseVersion parses the value of Header: ASCII digits
// without sign, leading zero or surrounding space, 1 to 15 digits.
// ("", false, nil) means the header was absent; a write without it is not
// checked.
func ParseVersion(values []string) (version int64, present bool, err error) {
	if len(values) == 0 {
		return 0, false, nil
	}
	if len(values) > 1 {
		return 0, true, ErrVersionInvalid
	}
	v := values[0]
	if v == "" || len(v) > maxVersionDigits || v[0] == '0' {
		return 0, true, ErrVersionInvalid
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, true, ErrVersionInvalid
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, true, ErrVersionInvalid
	}
	return n, true, nil
}

// StaleError is the refusal of a write decided against a version
// whose later changes touch the operation's inputs. It carries the fix: the
// changed inputs with their values then and now, and the version to decide
// against now.
type StaleError struct {
	// RecordID is the record the write targets.
	RecordID string
	// Decided is the version the write was decided against; Current the
	// record's version now, the one to decide against again.
	Decided, Current int64
	// Changes are the changed inputs (never empty).
	Changes []FieldChange
	// InboxID, when set, is where the write waits to be decided again (the
	// caller's inbox entry); reported as details.inboxId.
	InboxID string
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("decided: record %s changed in %d input(s) since version %d (now %d)", e.RecordID, len(e.Changes), e.Decided, e.Current)
}

// Details is the envelope's details object: recordId, decidedVersion,
// currentVersion (the version to decide against now), changes ([{field,
// old, new, version}]) and, when the write was kept, inboxId.
func (e *StaleError) Details() map[string]any {
	d := map[string]any{"recordId": e.RecordID, "decidedVersion": e.Decided, "currentVersion": e.Current, "changes": e.Changes}
	if e.InboxID != "" {
		d["inboxId"] = e.InboxID
	}
	return d
}

// Envelope returns the refusal as an HTTP answer: 409, Content-Type
// application/json, and the envelope {error: CodeStale, message,
// details: Details()}.
func (e *StaleError) Envelope() (status int, headers map[string]string, body []byte) {
	ae := e.apiError()
	return ae.Status, ae.Headers(), ae.Body()
}

func (e *StaleError) apiError() *apierr.Error {
	fields := ""
	for i, c := range e.Changes {
		if i > 0 {
			fields += ", "
		}
		fields += c.Field
	}
	msg := "The record changed since version %d in what this write decides on (%s); decide again against version %d."
	if e.InboxID != "" {
		msg += " The write waits in your inbox."
	}
	return apierr.New(http.StatusConflict, CodeStale, msg, e.Decided, fields, e.Current).WithDetails(e.Details())
}

// Checker is the offline-decision check of one operation: a write decided
// against version N of a record runs only when the record's changes since N
// touch none of Inputs.
//
// Guarantee: Check reads the history once; a write that passed it must
// still make its own store write conditional on the inputs it read (the
// check and the write are two round trips), as the reference host's cancel
// does by cancelling the run only at the version it checked, and its pause
// and resume by checking inside their own compare-and-set.
type Checker struct {
	// History looks up the record's changes. Required.
	History History
	// Inputs are the fields the operation decides on (for the reference
	// host's cancel: "status"). Required, non-empty.
	Inputs []string
}

// Check runs the check for a write decided against version decided of the
// record recordID in scope. It returns the record's current version and
// nil when the write may run; a *StaleError when a change touches
// an input; ErrRecordNotFound or ErrVersionAhead from the History; or the
// History's error.
func (d Checker) Check(ctx context.Context, scope, recordID string, decided int64) (current int64, err error) {
	if d.History == nil || len(d.Inputs) == 0 {
		return 0, errors.New("decided: Checker needs a History and at least one input")
	}
	if decided < 1 {
		return 0, ErrVersionAhead
	}
	changes, current, err := d.History.ChangesSince(ctx, scope, recordID, decided)
	if err != nil {
		return current, err
	}
	if decided > current {
		return current, ErrVersionAhead
	}
	if t := Touching(changes, d.Inputs); len(t) > 0 {
		return current, &StaleError{RecordID: recordID, Decided: decided, Current: current, Changes: t}
	}
	return current, nil
}

// RecordFunc names the record a request writes and the caller's scope
// (its tenant, from the credential); ok false answers 404 not_found.
type RecordFunc func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (scope, recordID string, ok bool)

// OnStale is called with a refusal before it is answered: it may keep the
// write for a later decision (setting e.InboxID). An error becomes a 500
// (under a Guard: a retryable failure, so the same-key retry checks again).
type OnStale func(ctx context.Context, ev events.APIGatewayV2HTTPRequest, e *StaleError) error

// HTTPAPI wraps an HTTP API handler with the check. The decided version is
// read from Header or If-Match (Parse); a request with
// neither runs h unchecked. Otherwise: a malformed header or a
// version the record never had is 400 validation_error (details.field is
// the header), a record the caller's scope does not have is 404 not_found,
// a stale decision is 409 CodeStale with the fix in details (after
// onStale, if set), and only a passed check runs h. Wrap the result with
// Guard.HTTPAPI so that the refusal, a final 4xx, is replayed to
// duplicates with the same key.
func (d Checker) HTTPAPI(record RecordFunc, onStale OnStale, h idem.HTTPAPIHandler) idem.HTTPAPIHandler {
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		decided, present, err := Parse(header.Values(ev.Headers, Header), header.Values(ev.Headers, HeaderIfMatch))
		if !present {
			return h(ctx, ev)
		}
		if err != nil {
			return v2Error(decidedInvalid(err)), nil
		}
		scope, id, ok := record(ctx, ev)
		if !ok {
			return v2Error(apierr.New(http.StatusNotFound, apierr.CodeNotFound, "not found")), nil
		}
		_, err = d.Check(ctx, scope, id, decided)
		var stale *StaleError
		switch {
		case err == nil:
			return h(ctx, ev)
		case errors.As(err, &stale):
			if onStale != nil {
				if err := onStale(ctx, ev, stale); err != nil {
					return events.APIGatewayV2HTTPResponse{}, err
				}
			}
			return v2Error(stale.apiError()), nil
		case errors.Is(err, ErrRecordNotFound):
			return v2Error(apierr.New(http.StatusNotFound, apierr.CodeNotFound, "not found")), nil
		case errors.Is(err, ErrVersionAhead):
			if len(header.Values(ev.Headers, Header)) == 0 {
				err = errors.Join(err, ErrIfMatchInvalid) // the version came from If-Match
			}
			return v2Error(decidedInvalid(err)), nil
		}
		return events.APIGatewayV2HTTPResponse{}, err
	}
}

// Invalid is the 400 validation_error envelope of a malformed
// Header or If-Match, or of a version the record never had (details.field
// names the header: If-Match when err also matches ErrIfMatchInvalid).
func Invalid(err error) (status int, headers map[string]string, body []byte) {
	e := decidedInvalid(err)
	return e.Status, e.Headers(), e.Body()
}

func decidedInvalid(err error) *apierr.Error {
	if errors.Is(err, ErrIfMatchInvalid) && errors.Is(err, ErrVersionAhead) {
		return apierr.New(http.StatusBadRequest, apierr.CodeValidation, "The %s header names a version the record never had.", HeaderIfMatch).
			WithDetails(map[string]any{"field": HeaderIfMatch})
	}
	if errors.Is(err, ErrIfMatchInvalid) {
		return apierr.New(http.StatusBadRequest, apierr.CodeValidation, "The %s header must be one strong entity tag of the record's version (its ETag), agreeing with %s when both are sent.", HeaderIfMatch, Header).
			WithDetails(map[string]any{"field": HeaderIfMatch})
	}
	msg := "The " + Header + " header must be a decimal version of 1 or more (an entity tag, the record's ETag, goes in " + HeaderIfMatch + ")."
	if errors.Is(err, ErrVersionAhead) {
		msg = "The " + Header + " header names a version the record never had."
	}
	return apierr.New(http.StatusBadRequest, apierr.CodeValidation, "%s", msg).
		WithDetails(map[string]any{"field": Header})
}

func v2Error(e *apierr.Error) events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{StatusCode: e.Status, Headers: e.Headers(), Body: string(e.Body())}
}
