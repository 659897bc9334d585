package apifn

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestUnlistedMajorIsRefused406OnEveryRoute: a request whose
// OpenWOP-Version names a major this host does not serve is refused 406
// protocol_version_unsupported with details.protocolVersions on every
// route — public, authenticated, unknown, mutating — before anything runs:
// the refused create leaves no idempotency record, so the same key under
// major 2 creates the run (201, not a replay). "2", "2.0" and the served
// version itself are served.
func TestUnlistedMajorIsRefused406OnEveryRoute(t *testing.T) {
	f := newFixture(t)
	for _, v := range []string{"1", "9", "1.0", "3.2", "2, 9"} {
		for _, e := range []events.APIGatewayV2HTTPRequest{
			ev("GET", "/.well-known/openwop", "", "", ""),
			ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop"}`),
			ev("GET", "/runs/acme~2Fabcdefghijklmnopqr", "acme", "", ""),
			ev("GET", "/nope", "acme", "", ""),
			ev("POST", "/runs", "", key1, `{"workflowId":"conformance-noop"}`),
		} {
			e.Headers["openwop-version"] = v
			r, m := f.do(t, e)
			d, _ := m["details"].(map[string]any)
			pv, _ := d["protocolVersions"].([]any)
			if r.StatusCode != 406 || m["error"] != CodeProtocolVersionUnsupported || m["message"] == nil ||
				len(pv) != 1 || pv[0] != settings.ProtocolVersion || r.Headers["OpenWOP-Version"] != settings.ProtocolVersion {
				t.Errorf("OpenWOP-Version %q on %s %s: %d %v %s", v, e.RequestContext.HTTP.Method, e.RawPath, r.StatusCode, r.Headers, r.Body)
			}
		}
	}
	for _, v := range []string{"", "2", "2.0", settings.ProtocolVersion} {
		e := ev("GET", "/.well-known/openwop", "", "", "")
		e.Headers["openwop-version"] = v
		if r, _ := f.do(t, e); r.StatusCode != 200 {
			t.Errorf("OpenWOP-Version %q: %d %s", v, r.StatusCode, r.Body)
		}
	}
	c := ev("POST", "/runs", "acme", key1, `{"workflowId":"conformance-noop"}`)
	c.Headers["openwop-version"] = "2"
	if r, _ := f.do(t, c); r.StatusCode != 201 || r.Headers[idem.HeaderOpenWOPReplay] == "true" {
		t.Fatalf("the same key under major 2 after the refusal: %d %v %s", r.StatusCode, r.Headers, r.Body)
	}
}

// TestRunSnapshotIfNoneMatch: GET /runs/{runId} evaluates If-None-Match
// against its strong ETag as RFC 9110 defines it, on both emulators: the
// tag itself, its weak form, a list holding it and "*" get 304 with no body
// and the ETag and Vary of the 200 (Cache-Control: no-cache does not
// suppress it); another tag, a weak other tag, a list without it and the
// previous version's tag get the 200 with the snapshot; a run that does not
// exist stays 404 under "*" and under a real tag.
func TestRunSnapshotIfNoneMatch(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		store := &hostruns.DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable")}
		f := hostOf(t, store, idem.Config{}, nil)
		created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		run := hostruns.NewRun("acme", "conformance-noop", json.RawMessage(`{}`), created)
		if err := store.Create(ctx, run); err != nil {
			t.Fatal(err)
		}
		path := "/runs/" + hostruns.ProjectID(run.ID)
		get := func(h map[string]string) events.APIGatewayV2HTTPResponse {
			e := ev("GET", path, "acme", "", "")
			for k, v := range h {
				e.Headers[k] = v
			}
			r, _ := f.do(t, e)
			return r
		}
		ok := get(nil)
		tag := ok.Headers["ETag"]
		if ok.StatusCode != 200 || tag == "" || ok.Headers["Vary"] == "" {
			t.Fatalf("unconditional GET: %d %v", ok.StatusCode, ok.Headers)
		}
		for _, c := range []struct {
			inm, cc string
			want    int
		}{
			{tag, "", 304},
			{"W/" + tag, "", 304},
			{`"no-such-tag", ` + tag, "", 304},
			{"*", "", 304},
			{tag, "no-cache", 304},
			{`"no-such-tag"`, "", 200},
			{`W/"no-such-tag"`, "", 200},
			{`"no-such-tag", "no-such-tag-2"`, "", 200},
		} {
			h := map[string]string{"if-none-match": c.inm}
			if c.cc != "" {
				h["cache-control"] = c.cc
			}
			r := get(h)
			if r.StatusCode != c.want {
				t.Errorf("If-None-Match %s (Cache-Control %q): %d, want %d", c.inm, c.cc, r.StatusCode, c.want)
				continue
			}
			if c.want == 304 && (r.Body != "" || r.Headers["ETag"] != tag || r.Headers["Vary"] != ok.Headers["Vary"] ||
				r.Headers["OpenWOP-Version"] == "") {
				t.Errorf("If-None-Match %s: the 304 carries %v and %d body bytes", c.inm, r.Headers, len(r.Body))
			}
			if c.want == 200 && (r.Headers["ETag"] != tag || r.Body != ok.Body) {
				t.Errorf("If-None-Match %s: the 200 is not the snapshot: %v %s", c.inm, r.Headers, r.Body)
			}
		}
		if _, err := store.Transition(ctx, run.ID, []hostruns.Status{hostruns.StatusPending}, hostruns.StatusRunning, "", created.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if r := get(map[string]string{"if-none-match": tag}); r.StatusCode != 200 || r.Headers["ETag"] == tag {
			t.Fatalf("the previous version's tag after a transition: %d %v", r.StatusCode, r.Headers)
		}
		// Progress that moves no tracked field (an executor's heartbeat:
		// the snapshot's updatedAt) changes the snapshot, so its tag: a
		// strong tag names one representation (the runs chapter: the ETag
		// MUST change on every observable transition).
		running := get(nil)
		if _, err := store.Renew(ctx, run.ID, 1, created.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		r := get(map[string]string{"if-none-match": running.Headers["ETag"]})
		if r.StatusCode != 200 || r.Body == running.Body || r.Headers["ETag"] == running.Headers["ETag"] {
			t.Fatalf("after a heartbeat: %d, ETag %s (before %s); want the changed snapshot under a new tag", r.StatusCode, r.Headers["ETag"], running.Headers["ETag"])
		}
		absent := path[:len(path)-1] + map[bool]string{true: "b", false: "a"}[path[len(path)-1] == 'a']
		for _, inm := range []string{"*", tag} {
			e := ev("GET", absent, "acme", "", "")
			e.Headers["if-none-match"] = inm
			if r, m := f.do(t, e); r.StatusCode != 404 || m["error"] != "not_found" {
				t.Errorf("If-None-Match %s on an absent run: %d %s", inm, r.StatusCode, r.Body)
			}
		}
	})
}
