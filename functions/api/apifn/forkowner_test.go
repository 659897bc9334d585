package apifn

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// TestForkOwnerIsTheSourcesVerbatim: the runs chapter copies a fork's
// owner verbatim from its parent, and has run.started echo the run's owner
// exactly as its snapshot carries it. A replay fork from 0 (its own
// run.started), a branch from 1 (the source's run.started inherited) and
// a replay from the terminal event each answer GET /runs/{runId} with the
// source's owner byte for byte, and their run.started carries that same
// owner.
func TestForkOwnerIsTheSourcesVerbatim(t *testing.T) {
	f := newFixture(t)
	src := sourceRun(t, f, "acme", runs.StatusCompleted) // terminal event at 9
	ownerOf := func(id string) json.RawMessage {
		t.Helper()
		r, _ := f.do(t, ev("GET", "/runs/"+runs.ProjectID(id), "acme", "", ""))
		var snap struct {
			Owner json.RawMessage `json:"owner"`
		}
		if r.StatusCode != http.StatusOK || json.Unmarshal([]byte(r.Body), &snap) != nil || len(snap.Owner) == 0 {
			t.Fatalf("GET %s: %d %s", id, r.StatusCode, r.Body)
		}
		return snap.Owner
	}
	startedOwner := func(id string) json.RawMessage {
		t.Helper()
		r, _ := f.do(t, ev("GET", "/runs/"+runs.ProjectID(id)+"/events/poll", "acme", "", ""))
		var page struct {
			Events []struct {
				Type    string `json:"type"`
				Payload struct {
					Owner json.RawMessage `json:"owner"`
				} `json:"payload"`
			} `json:"events"`
		}
		if r.StatusCode != http.StatusOK || json.Unmarshal([]byte(r.Body), &page) != nil || len(page.Events) == 0 || page.Events[0].Type != "run.started" {
			t.Fatalf("poll %s: %d %s", id, r.StatusCode, r.Body)
		}
		return page.Events[0].Payload.Owner
	}
	want := ownerOf(src.ID)
	if got := startedOwner(src.ID); !bytes.Equal(got, want) {
		t.Fatalf("the source's run.started owner %s, its snapshot's %s", got, want)
	}
	for i, body := range []string{`{"mode":"replay"}`, `{"mode":"branch","fromSeq":1}`, `{"mode":"replay","fromSeq":9}`} {
		r, m := f.fork(t, src.ID, "fork-owner-key-0000000000"+string(rune('a'+i)), body)
		id, _ := m["runId"].(string)
		if r.StatusCode != http.StatusCreated || id == "" {
			t.Fatalf("fork %s: %d %s", body, r.StatusCode, r.Body)
		}
		if got := ownerOf(id); !bytes.Equal(got, want) {
			t.Errorf("fork %s: owner %s, the source's %s", body, got, want)
		}
		if got := startedOwner(id); !bytes.Equal(got, want) {
			t.Errorf("fork %s: run.started owner %s, the source's %s", body, got, want)
		}
	}
}
