package apifn

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestRetryCancelledBeforeItsRunIsWritten: without transactions a retry
// whose listing on the failed run landed and whose run's write did not
// (the key answered 5xx, retryable) is listed with no run. A cancel of
// that id is 404, and GET is 404, as for any id no run holds; when the
// key is retried, its run is written cancelled by that cancel and the
// key answered 201 naming it cancelled, GET then 200 cancelled: the
// retry never becomes a pending run for the executor to start. Before,
// the key's retry wrote it pending, after its cancel was told it did not
// exist. On every engine.
func TestRetryCancelledBeforeItsRunIsWritten(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		faults := dynamotest.NewFaults()
		c := e.Client(dynamotest.FastRetries)
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		_, st := dynamoStores(t, e, c, false)
		h := &retryCapHost{f: hostOf(t, rs, idem.Config{Store: st}, nil), c: c, rs: rs, tenant: strings.Repeat("t", 128)}
		failed := h.largestFailed(t)
		const key = "k-retry-cancelled-0123456789ab"
		faults.FailNext("PutItem", 100, dynamotest.InternalServerError()) // the run's write, through the SDK's retries
		if _, status, m := h.retry(t, failed.ID, key); status < 500 {
			t.Fatalf("a retry whose run write failed: %d %v", status, m)
		}
		faults.Clear()
		f, err := rs.Get(ctx, failed.ID)
		if err != nil || len(f.Retries) != 1 {
			t.Fatalf("the failed run lists %v (%v); want the retry's id", f.Retries, err)
		}
		id := f.Retries[0]
		path := "/runs/" + runs.ProjectID(id)
		if r, _ := h.f.do(t, ev("POST", path+"/cancel", h.tenant, "k-cancel-listed-0123456789abc", `{"reason":"not wanted"}`)); r.StatusCode != http.StatusNotFound {
			t.Fatalf("a cancel of the listed retry not written: %d %s", r.StatusCode, r.Body)
		}
		if r, _ := h.f.do(t, ev("GET", path, h.tenant, "", "")); r.StatusCode != http.StatusNotFound {
			t.Fatalf("GET of the listed retry not written: %d %s", r.StatusCode, r.Body)
		}

		ok, status, m := h.retry(t, failed.ID, key)
		if !ok || m["runId"] != id || m["status"] != string(runs.StatusCancelled) {
			t.Fatalf("the key retried after its run's cancel: %d %v; want 201 naming %s cancelled", status, m, id)
		}
		r, g := h.f.do(t, ev("GET", path, h.tenant, "", ""))
		if r.StatusCode != http.StatusOK || g["status"] != string(runs.StatusCancelled) {
			t.Fatalf("GET of the retry after its key's retry: %d %s; want 200 cancelled", r.StatusCode, r.Body)
		}
		got, err := rs.Get(ctx, id)
		if err != nil || got.Status != runs.StatusCancelled || got.CancelReason != "not wanted" {
			t.Fatalf("the retry's run: %+v %v; want it cancelled for the cancel's reason", got, err)
		}
		if again, m := h.f.do(t, ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", h.tenant, key, "")); again.StatusCode != http.StatusCreated || m["runId"] != id {
			t.Fatalf("the key's replay: %d %s", again.StatusCode, again.Body)
		}
	})
}
