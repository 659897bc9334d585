package idem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/header"
)

// HeaderDecidedVersion carries the version of the record a write was decided
// against: a client that queued the write offline sends it later with its
// Idempotency-Key and this header (a decimal version, 1 or more). The write
// runs only when the record's changes since that version touch none of the
// operation's declared inputs (see Decided). A request without the header is
// not checked.
//
// The header is not part of the request fingerprint: the key binds the
// write, and a duplicate with the same key replays the first answer (a
// refusal included) whatever version it carries.
const HeaderDecidedVersion = "Idempotency-Decided-Version"

// CodeStaleDecision is the error code of a write refused because the record
// changed, since the version it was decided against, in a field the
// operation decides on (HTTP 409; a vendor code: the OpenWOP registry has
// no row for it).
const CodeStaleDecision = "idemkit.stale_decision"

// ErrDecidedVersionInvalid is returned by ParseDecidedVersion for a value
// that is not a decimal version of 1 or more.
var ErrDecidedVersionInvalid = errors.New("idem: " + HeaderDecidedVersion + " is not a decimal version of 1 or more")

// maxVersionDigits bounds the header so that every accepted value fits an
// int64 and a JSON number.
const maxVersionDigits = 15

// ParseDecidedVersion parses the value of HeaderDecidedVersion: ASCII digits
// without sign, leading zero or surrounding space, 1 to 15 digits.
// ("", false, nil) means the header was absent; a write without it is not
// checked.
func ParseDecidedVersion(values []string) (version int64, present bool, err error) {
	if len(values) == 0 {
		return 0, false, nil
	}
	if len(values) > 1 {
		return 0, true, ErrDecidedVersionInvalid
	}
	v := values[0]
	if v == "" || len(v) > maxVersionDigits || v[0] == '0' {
		return 0, true, ErrDecidedVersionInvalid
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, true, ErrDecidedVersionInvalid
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, true, ErrDecidedVersionInvalid
	}
	return n, true, nil
}

// StaleDecisionError is the refusal of a write decided against a version
// whose later changes touch the operation's inputs. It carries the fix: the
// changed inputs with their values then and now, and the version to decide
// against now.
type StaleDecisionError struct {
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

func (e *StaleDecisionError) Error() string {
	return fmt.Sprintf("idem: record %s changed in %d input(s) since version %d (now %d)", e.RecordID, len(e.Changes), e.Decided, e.Current)
}

// Details is the envelope's details object: recordId, decidedVersion,
// currentVersion (the version to decide against now), changes ([{field,
// old, new, version}]) and, when the write was kept, inboxId.
func (e *StaleDecisionError) Details() map[string]any {
	d := map[string]any{"recordId": e.RecordID, "decidedVersion": e.Decided, "currentVersion": e.Current, "changes": e.Changes}
	if e.InboxID != "" {
		d["inboxId"] = e.InboxID
	}
	return d
}

// Envelope returns the refusal as an HTTP answer: 409, Content-Type
// application/json, and the envelope {error: CodeStaleDecision, message,
// details: Details()}.
func (e *StaleDecisionError) Envelope() (status int, headers map[string]string, body []byte) {
	ae := e.apiError()
	return ae.Status, ae.Headers(), ae.Body()
}

func (e *StaleDecisionError) apiError() *apierr.Error {
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
	return apierr.New(http.StatusConflict, CodeStaleDecision, msg, e.Decided, fields, e.Current).WithDetails(e.Details())
}

// Decided is the offline-decision check of one operation: a write decided
// against version N of a record runs only when the record's changes since N
// touch none of Inputs.
//
// Guarantee: Check reads the history once; a write that passed it must
// still make its own store write conditional on the inputs it read (the
// check and the write are two round trips), as the reference host's cancel
// does by moving the run only from the status it checked.
type Decided struct {
	// History looks up the record's changes. Required.
	History History
	// Inputs are the fields the operation decides on (for the reference
	// host's cancel: "status"). Required, non-empty.
	Inputs []string
}

// Check runs the check for a write decided against version decided of the
// record recordID in scope. It returns the record's current version and
// nil when the write may run; a *StaleDecisionError when a change touches
// an input; ErrRecordNotFound or ErrVersionAhead from the History; or the
// History's error.
func (d Decided) Check(ctx context.Context, scope, recordID string, decided int64) (current int64, err error) {
	if d.History == nil || len(d.Inputs) == 0 {
		return 0, errors.New("idem: Decided needs a History and at least one input")
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
		return current, &StaleDecisionError{RecordID: recordID, Decided: decided, Current: current, Changes: t}
	}
	return current, nil
}

// DecidedRecord names the record a request writes and the caller's scope
// (its tenant, from the credential); ok false answers 404 not_found.
type DecidedRecord func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (scope, recordID string, ok bool)

// OnStale is called with a refusal before it is answered: it may keep the
// write for a later decision (setting e.InboxID). An error becomes a 500
// (under a Guard: a retryable failure, so the same-key retry checks again).
type OnStale func(ctx context.Context, ev events.APIGatewayV2HTTPRequest, e *StaleDecisionError) error

// HTTPAPI wraps an HTTP API handler with the check. The decided version is
// read from HeaderDecidedVersion or If-Match (ParseDecided); a request with
// neither runs h unchecked. Otherwise: a malformed header or a
// version the record never had is 400 validation_error (details.field is
// the header), a record the caller's scope does not have is 404 not_found,
// a stale decision is 409 CodeStaleDecision with the fix in details (after
// onStale, if set), and only a passed check runs h. Wrap the result with
// Guard.HTTPAPI so that the refusal, a final 4xx, is replayed to
// duplicates with the same key.
func (d Decided) HTTPAPI(record DecidedRecord, onStale OnStale, h HTTPAPIHandler) HTTPAPIHandler {
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		decided, present, err := ParseDecided(header.Values(ev.Headers, HeaderDecidedVersion), header.Values(ev.Headers, HeaderIfMatch))
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
		var stale *StaleDecisionError
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
			return v2Error(decidedInvalid(err)), nil
		}
		return events.APIGatewayV2HTTPResponse{}, err
	}
}

// DecidedInvalid is the 400 validation_error envelope of a malformed
// HeaderDecidedVersion or a version the record never had (details.field
// names the header).
func DecidedInvalid(err error) (status int, headers map[string]string, body []byte) {
	e := decidedInvalid(err)
	return e.Status, e.Headers(), e.Body()
}

func decidedInvalid(err error) *apierr.Error {
	if errors.Is(err, ErrIfMatchInvalid) {
		return apierr.New(http.StatusBadRequest, apierr.CodeValidation, "The %s header must be one strong entity tag of the record's version (its ETag), agreeing with %s when both are sent.", HeaderIfMatch, HeaderDecidedVersion).
			WithDetails(map[string]any{"field": HeaderIfMatch})
	}
	msg := "The " + HeaderDecidedVersion + " header must be a decimal version of 1 or more."
	if errors.Is(err, ErrVersionAhead) {
		msg = "The " + HeaderDecidedVersion + " header names a version the record never had."
	}
	return apierr.New(http.StatusBadRequest, apierr.CodeValidation, "%s", msg).
		WithDetails(map[string]any{"field": HeaderDecidedVersion})
}

func v2Error(e *apierr.Error) events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{StatusCode: e.Status, Headers: e.Headers(), Body: string(e.Body())}
}
