package apifn

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
)

// capRefusedAsEarlier is a RunStore whose Create of a retry does what
// versions before RED_TEAM 316 did without transactions when the cap
// refused the retry's listing: the run is written, then cancelled for the
// cap (the stored reason those versions gave), and the refusal returned.
type capRefusedAsEarlier struct{ *runs.MemRuns }

func (s capRefusedAsEarlier) Create(ctx context.Context, r runs.Run) error {
	if r.RetryOf == "" {
		return s.MemRuns.Create(ctx, r)
	}
	r.RetryOf = "" // written unlisted, as those versions wrote it first
	if err := s.MemRuns.Create(ctx, r); err != nil {
		return err
	}
	if _, err := s.Cancel(ctx, r.ID, []runs.Status{runs.StatusPending}, "",
		"the failed run it retries already lists the most retries it can", r.CreatedAt); err != nil {
		return err
	}
	return &runs.RetryLimitError{Retries: MaxRunRetries}
}

// TestCommerceDuplicateNeverShowsARetryCancelledAtTheCap: under the
// commerce policy, a duplicate of a retry whose first execution (under an
// earlier version) wrote its run, was refused at the cap and cancelled it,
// and is still pending, is answered the pending answer naming no run,
// never that cancelled run as the key's Action (runObject,
// runs.CancelledAtCap); the key then replays its 409. Without the check
// (RED_TEAM 316's, which no test held) the duplicate is answered 201 with
// the cancelled run.
func TestCommerceDuplicateNeverShowsARetryCancelledAtTheCap(t *testing.T) {
	mem := runs.NewMemRuns()
	h := newPendingRunHost(t, capRefusedAsEarlier{mem}, idemmem.New(), nil)
	h.rs = mem
	failed := h.seed(t, runs.StatusFailed)
	req := commerceReq("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", "retry cancelled at the cap")
	entered, release := h.st.arm()
	firstc := make(chan events.APIGatewayV2HTTPResponse, 1)
	go func() {
		r, err := h.f.h.Handle(context.Background(), req)
		if err != nil {
			r = events.APIGatewayV2HTTPResponse{StatusCode: 599, Body: err.Error()}
		}
		firstc <- r
	}()
	<-entered
	dup, m := h.f.do(t, withMode(req, "async"))
	close(release)
	first := <-firstc
	if first.StatusCode != http.StatusConflict {
		t.Fatalf("the first execution: %d %s, want 409 %s", first.StatusCode, first.Body, CodeRetryLimitReached)
	}
	if id, _ := m["runId"].(string); id != "" || dup.StatusCode != http.StatusAccepted {
		t.Fatalf("the duplicate while the refused retry is pending: %d %s; want 202, the pending answer naming no run", dup.StatusCode, dup.Body)
	}
	if again, m := h.f.do(t, withMode(req, "async")); again.StatusCode != http.StatusConflict || m["error"] != CodeRetryLimitReached {
		t.Fatalf("the key once the first execution ended: %d %s, want its 409", again.StatusCode, again.Body)
	}
}
