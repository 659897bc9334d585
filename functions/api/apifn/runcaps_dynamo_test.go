package apifn

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestTimedOutRunAfterwards: what a caller meets once a run created with
// runTimeoutMs has been ended on it (RunStore.Breach), on the three
// engines: the replay of its createRun key answers the run as it is now,
// failed with error.code run_timeout; a cancel is 409 run_terminal and
// changes nothing; a retry is a new pending run with the same configurable,
// whose deadline counts from its own creation, and no error code.
func TestTimedOutRunAfterwards(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		ctx := context.Background()
		const conf = `{"version":1,"run":{"runTimeoutMs":1000}}`
		create := commerceCreate("checkout cart 77", "")
		create.Body = `{"workflowId":"conformance-noop","inputs":{"n":1},"configurable":` + conf + `}`
		r, m := c.f.do(t, create)
		id, _ := m["runId"].(string)
		if r.StatusCode != 201 || id == "" {
			t.Fatalf("create: %d %s", r.StatusCode, r.Body)
		}
		created := c.get(t, id)
		if _, err := c.runs.Transition(ctx, id, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		at := created.Deadline()
		if _, err := c.runs.Breach(ctx, id, runs.LogEvent{Type: runs.EventCapBreached, At: at,
			Payload: json.RawMessage(`{"kind":"run-duration","limit":1000,"observed":1000}`)},
			"run_timeout", "the run did not end within its runTimeoutMs (1000 ms)", at); err != nil {
			t.Fatal(err)
		}
		ended := c.get(t, id)

		r, m = c.f.do(t, create)
		if errObj, _ := m["error"].(map[string]any); r.StatusCode != 201 || m["runId"] != id || m["status"] != "failed" || errObj["code"] != "run_timeout" {
			t.Fatalf("replay of the createRun key: %d %s", r.StatusCode, r.Body)
		}

		r, m = c.f.do(t, commerceReq("POST", "/runs/"+runs.ProjectID(id)+"/cancel", "cancel cart 77"))
		if r.StatusCode != 409 || m["error"] != apierr.CodeRunTerminal {
			t.Fatalf("cancel of the timed-out run: %d %s", r.StatusCode, r.Body)
		}
		if after := c.get(t, id); after.Version != ended.Version || after.Status != runs.StatusFailed || after.ErrorCode != "run_timeout" {
			t.Fatalf("the refused cancel changed the run: %+v", after)
		}

		r, m = c.f.do(t, commerceReq("POST", "/runs/"+runs.ProjectID(id)+"/retry", "retry cart 77"))
		retryID, _ := m["runId"].(string)
		if r.StatusCode != 201 || retryID == "" || retryID == id || m["status"] != "pending" || m["error"] != nil {
			t.Fatalf("retry of the timed-out run: %d %s", r.StatusCode, r.Body)
		}
		retry := c.get(t, retryID)
		if string(retry.Options.Configurable) != conf || retry.ErrorCode != "" || retry.RetryOf != id ||
			retry.CreatedAt.Before(created.CreatedAt) || !retry.Deadline().Equal(retry.CreatedAt.Truncate(time.Millisecond).Add(time.Second)) {
			t.Fatalf("the retry: configurable %s, code %q, retryOf %q, created %v (source %v), deadline %v",
				retry.Options.Configurable, retry.ErrorCode, retry.RetryOf, retry.CreatedAt, created.CreatedAt, retry.Deadline())
		}
	})
}
