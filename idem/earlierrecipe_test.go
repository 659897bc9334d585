package idem_test

import (
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
)

// The fingerprints the code before RED_TEAM 313 and 314 wrote, computed on
// that code: pinEarlierPatch for `[{"op":"remove","path":"/a"}]` on
// PATCH /docs/{id}, sent as application/json-patch+json and as
// application/merge-patch+json alike (it took neither media type); a POST
// of {"a":1} to /docs/{id} tunnelling DELETE, tunnelling PUT and
// tunnelling nothing alike had pinOverrideNone.
const pinEarlierPatch = "request-sha256-v1:vxf8u_bv7MKImUkiWbor-w55Vaa7-7M16jlri6l5nnI"

// TestEarlierRecipesRecordCannotTellARetryFromAnotherRequest pins why the
// records written before the media type and the method-override header
// joined the fingerprint cannot be compared "the earlier way" (RED_TEAM
// AJ): the earlier version wrote one and the same record for a JSON Patch
// and for a merge patch of the same bytes (and for a POST tunnelling
// DELETE and one tunnelling PUT), so a rule that replays a JSON Patch's
// retry from such a record replays 313's merge patch too (and 314's PUT).
// The record here is written by today's code for the same bytes sent as
// application/json (a POST tunnelling nothing), whose fingerprint is the
// earlier version's for every one of those requests (pinned to the values
// computed on that code): a JSON Patch and a merge patch against it are
// each refused, never run and never replayed; the request that wrote it
// replays byte-exact. And a record written with today's recipe is never
// matched by the earlier one: the same bytes as application/json (the
// earlier recipe's fingerprint of the JSON Patch) are refused, the JSON
// Patch's own retry is its replay.
func TestEarlierRecipesRecordCannotTellARetryFromAnotherRequest(t *testing.T) {
	const patch = `[{"op":"remove","path":"/a"}]`
	newRecorded := func(t *testing.T) (*env, *digestRecorder) {
		rec := &digestRecorder{}
		return newEnv(t, func(cfg *idem.Config) {
			rec.Store = cfg.Store
			cfg.Store = rec
		}), rec
	}
	send := func(e *env, h *handler, method, body string, headers map[string]string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		ev := v2event(method, method+" /docs/{id}", testKey, body)
		ev.PathParameters = map[string]string{"id": "d1"}
		for k, v := range headers {
			withHeader(k, v)(&ev)
		}
		return e.call(h, ev)
	}
	ct := func(v string) map[string]string { return map[string]string{"Content-Type": v} }
	notReplayed := func(t *testing.T, name string, first, r events.APIGatewayV2HTTPResponse, h *handler) {
		t.Helper()
		if r.StatusCode != 409 || r.Headers[idem.HeaderOpenWOPReplay] == "true" || r.Body == first.Body || h.Calls() != 1 {
			t.Fatalf("%s: %d %v %s (handler ran %d times); want 409, not run", name, r.StatusCode, r.Headers, r.Body, h.Calls())
		}
	}
	replays := func(t *testing.T, name string, first, r events.APIGatewayV2HTTPResponse, h *handler) {
		t.Helper()
		if r.StatusCode != first.StatusCode || r.Headers[idem.HeaderOpenWOPReplay] != "true" || r.Body != first.Body || h.Calls() != 1 {
			t.Fatalf("%s: %d %v %s (handler ran %d times); want the first answer replayed byte-exact", name, r.StatusCode, r.Headers, r.Body, h.Calls())
		}
	}

	t.Run("a media type", func(t *testing.T) {
		e, rec := newRecorded(t)
		h := &handler{}
		first := send(e, h, http.MethodPatch, patch, ct("application/json"))
		if first.StatusCode != 201 || len(rec.digests) != 1 || rec.digests[0] != pinEarlierPatch {
			t.Fatalf("first: %d %s, digests %q; want 201 and [%s], the record the earlier version wrote for the JSON Patch and for the merge patch", first.StatusCode, first.Body, rec.digests, pinEarlierPatch)
		}
		// In one history this is the JSON Patch's retry, in the other
		// 313's merge patch: the record is the same in both.
		notReplayed(t, "a JSON Patch against the earlier version's record", first, send(e, h, http.MethodPatch, patch, ct("application/json-patch+json")), h)
		notReplayed(t, "a merge patch against the earlier version's record", first, send(e, h, http.MethodPatch, patch, ct("application/merge-patch+json")), h)
		replays(t, "the same bytes as application/json again", first, send(e, h, http.MethodPatch, patch, ct("application/json")), h)
	})

	t.Run("a method override", func(t *testing.T) {
		e, rec := newRecorded(t)
		h := &handler{status: 200}
		first := send(e, h, http.MethodPost, `{"a":1}`, nil)
		if first.StatusCode != 200 || len(rec.digests) != 1 || rec.digests[0] != pinOverrideNone {
			t.Fatalf("first: %d %s, digests %q; want 200 and [%s], the record the earlier version wrote for a POST tunnelling DELETE, PUT or nothing", first.StatusCode, first.Body, rec.digests, pinOverrideNone)
		}
		for _, m := range []string{"DELETE", "PUT"} {
			notReplayed(t, "a POST tunnelling "+m+" against the earlier version's record", first, send(e, h, http.MethodPost, `{"a":1}`, map[string]string{"X-HTTP-Method-Override": m}), h)
		}
		replays(t, "the POST tunnelling nothing again", first, send(e, h, http.MethodPost, `{"a":1}`, nil), h)
	})

	t.Run("a record of today's recipe", func(t *testing.T) {
		e, _ := newRecorded(t)
		h := &handler{}
		first := send(e, h, http.MethodPatch, patch, ct("application/json-patch+json"))
		if first.StatusCode != 201 {
			t.Fatalf("first: %d %s", first.StatusCode, first.Body)
		}
		replays(t, "the JSON Patch's retry", first, send(e, h, http.MethodPatch, patch, ct("application/json-patch+json")), h)
		for _, c := range []string{"application/json", "application/merge-patch+json"} {
			notReplayed(t, "the same bytes as "+c+" against a JSON Patch's record of today", first, send(e, h, http.MethodPatch, patch, ct(c)), h)
		}
	})
}
