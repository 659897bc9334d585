package apifn

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// TestBulkCancelRunIdsRefusalSaysWhatIsWrong: a bulk cancel body without
// runIds is told runIds is required; one whose runIds is given but is no
// JSON array (a string, an object, a number, null) is told what runIds must
// be, never that it is missing (RED_TEAM 589). Each names details.field
// runIds.
func TestBulkCancelRunIdsRefusalSaysWhatIsWrong(t *testing.T) {
	const missing = "runIds is required: an array of 1 to 100 runIds"
	const given = "runIds must be an array of 1 to 100 runIds"
	for body, want := range map[string]string{
		`{}`:                      missing,
		`{"reason":"x"}`:          missing,
		`{"runIds":"demo-a/abc"}`: given,
		`{"runIds":{}}`:           given,
		`{"runIds":5}`:            given,
		`{"runIds":null}`:         given,
	} {
		_, e := parseBulkCancel(events.APIGatewayV2HTTPRequest{Body: body, Headers: map[string]string{"content-type": "application/json"}})
		if e == nil || e.Status != 400 || e.Details["field"] != "runIds" || e.Message != want {
			t.Errorf("%s: %v, want a 400 saying %q", body, e, want)
		}
	}
}
