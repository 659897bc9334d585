package apifn

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
)

// The object a run-creating key names: under a policy whose replays render
// the object the key created (idem.ReplayObject, the commerce policy's
// Action), a replay of createRun or retryRun answers the run as it is now,
// in the shape of the first answer (runAction). The route declares how its
// object is loaded (Route.object); the policy decides whether a replay
// renders it.

// runObject is createRun's and retryRun's Route.object: the run the key's
// first execution created (runs.ClaimRunID of its claim, the id
// createClaimedRun gave it), rendered as runAction. A stored answer other
// than 201 created no run: nothing to render (the stored answer replays).
//
// While the first execution still runs (stored nil) the run is named only
// once it is written: a written run can only end, never vanish (its
// execution answers its 201, or fails and is run again under the same
// claim, which finds it). Until then nothing is rendered, and the
// duplicate gets the policy's pending answer, which names no run: the
// first execution may yet create none (a create refused for a held scope
// or a bad body, a runner unavailable, a retry of a run not failed), or
// write it only with its completion (transactional). The read is the one
// a pending Action always cost (one consistent GetItem); one that fails
// renders nothing either (idem logs it), never a run it could not find.
func (h *Handler) runObject(ctx context.Context, c call, first idem.ClaimInfo, stored *idem.Response) (idem.ObjectState, error) {
	if stored != nil && stored.Status != http.StatusCreated || first.OriginalRequestID == "" {
		return idem.ObjectState{}, nil
	}
	id := runs.ClaimRunID(c.tenant, first.ID, first.OriginalRequestID)
	r, err := h.cfg.Runs.Get(ctx, id)
	switch {
	case errors.Is(err, runs.ErrRunNotFound):
		return idem.ObjectState{}, nil
	case err != nil:
		return idem.ObjectState{}, err
	case r.Tenant != c.tenant, runs.CancelledAtCap(r):
		// Another tenant's; or a retry an earlier version wrote before its
		// listing and cancelled when the cap refused it: the key's answer
		// is that refusal, not this run.
		return idem.ObjectState{}, nil
	}
	b, err := json.Marshal(h.runAction(c.ev, r))
	if err != nil {
		return idem.ObjectState{}, err
	}
	return idem.ObjectState{Settled: r.Status.Terminal(), Response: &idem.Response{Status: http.StatusCreated,
		Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: b}}, nil
}

// runAction is the answer of createRun and retryRun for run r: runId,
// status, eventsUrl and statusUrl; for a retry the failed run it retries,
// as on (the link's name) and retryOf (its alias); once the run ended,
// completedAt, and for a failed run its error {code, message}.
func (h *Handler) runAction(ev events.APIGatewayV2HTTPRequest, r runs.Run) map[string]any {
	base := h.baseURL(ev) + "/runs/" + runs.ProjectID(r.ID)
	out := map[string]any{"runId": r.ID, "status": r.Status, "eventsUrl": base + "/events", "statusUrl": base}
	if r.RetryOf != "" {
		out[MemberOn], out[MemberRetryOf] = r.RetryOf, r.RetryOf
	}
	if r.Status.Terminal() && !r.UpdatedAt.IsZero() {
		out["completedAt"] = endedAt(r).UTC().Format(time.RFC3339Nano) // the terminal event's time
	}
	if r.Status == runs.StatusFailed {
		out["error"] = map[string]any{"code": failureCode(r), "message": failureMessage(r)}
	}
	return out
}

// The members linking a retry to the failed run it retries: on (the
// commerce platform's name of the link) and retryOf, its alias, on the
// retry; retries, on the failed run, the runs started from it.
const (
	MemberOn      = "on"
	MemberRetryOf = "retryOf"
	MemberRetries = "retries"
)

// snapshotETag is the strong ETag of a run snapshot: the run's version
// stamped with the first 9 bytes of the snapshot's SHA-256 (base64url),
// "7.Xy…", so it names that representation byte for byte; decided.Parse
// reads the version of such a tag sent back as If-Match.
func snapshotETag(v int64, snapshot []byte) string {
	sum := sha256.Sum256(snapshot)
	return `"` + strconv.FormatInt(v, 10) + "." + base64.RawURLEncoding.EncodeToString(sum[:9]) + `"`
}
