package apifn

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestForkPastTheBoundaryOnlyForItsOwnKey: a key whose fork was written
// inside the fork retention (its completion lost) is answered that fork
// past the boundary; nobody else reaches the source's history through
// it. Past the boundary, with that fork written and the key's record
// still open: a fork without a key, under another key, under the same key
// with another body, and under the same key from another tenant (its
// credential names the tenant) are each refused as before (422
// fork_point_invalid, 409 idempotency_key_mismatch, 403 id_tenant_mismatch) and none names
// the key's fork; the key's own retry then still answers its fork. Memory
// and every emulator.
func TestForkPastTheBoundaryOnlyForItsOwnKey(t *testing.T) {
	onEveryBackend(t, func(t *testing.T, e *dynamotest.Emulator) {
		const key, body = "k-fork-boundary-others-001", forkReplayBody
		f, src, fork := forkLostInsideRetention(t, e, key)

		notTheFork := func(what string, r events.APIGatewayV2HTTPResponse, wantStatus int, wantCode string) {
			t.Helper()
			var m map[string]any
			_ = json.Unmarshal([]byte(r.Body), &m)
			if r.StatusCode != wantStatus || (wantCode != "" && m["error"] != wantCode) || m["runId"] == fork {
				t.Fatalf("%s past the boundary: %d %s, want %d %s (never the key's fork %s)", what, r.StatusCode, r.Body, wantStatus, wantCode, fork)
			}
		}
		r, _ := f.fork(t, src.ID, "", body)
		notTheFork("a fork without a key", r, http.StatusUnprocessableEntity, CodeForkPointInvalid)
		r, _ = f.fork(t, src.ID, "k-fork-boundary-others-002", body)
		notTheFork("a fork under another key", r, http.StatusUnprocessableEntity, CodeForkPointInvalid)
		r, _ = f.fork(t, src.ID, key, `{"mode":"replay","fromSeq":0}`)
		notTheFork("the key with another body", r, http.StatusConflict, "idempotency_key_mismatch")
		r, _ = f.do(t, ev("POST", forkPath(src.ID), "other", key, body))
		notTheFork("the key from another tenant", r, http.StatusForbidden, "id_tenant_mismatch")

		r, m := f.fork(t, src.ID, key, body)
		if r.StatusCode != http.StatusCreated || m["runId"] != fork {
			t.Fatalf("the key's retry past the boundary: %d %s, want 201 naming its fork %s", r.StatusCode, r.Body, fork)
		}
	})
}
