package conformtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The commerce policy's offline-decided writes on the reference server: a
// run has a version (1 at creation, +1 per change), GET answers it as a
// strong ETag, a cancel with If-Match of another version is refused 409
// stale_decision and the refused write waits in the caller's inbox (its
// namespace and worker), which no other caller can list or discard.

type inboxEntry struct {
	id, owner, status string
}

// owner is the caller an inbox entry belongs to (InboxTenantWide: the
// namespace only).
func (s *Server) owner(c credential) string {
	if s.brk.InboxTenantWide {
		return c.tenant
	}
	return c.tenant + "\x00" + c.worker
}

// credKey carries a request's credential to its handler.
type credKey struct{}

// staleCancel refuses a cancel whose If-Match is not the run's version
// (commerce, s.mu held); ok is false when the cancel runs.
func (s *Server) staleCancel(r *http.Request, run *refRun) (int, []byte, bool) {
	im := r.Header.Get("If-Match")
	if s.profile != Commerce || im == "" || im == etag(run.version) && !s.brk.IfMatchRefusesCurrent {
		return 0, nil, false
	}
	c, _ := r.Context().Value(credKey{}).(credential)
	e := &inboxEntry{id: "inbox-" + randID(), owner: s.owner(c), status: "waiting"}
	s.inbox = append(s.inbox, e)
	return 409, envelopeBody("stale_decision", "the run changed since the version this write was decided against; decide again from the inbox",
		map[string]any{"currentVersion": run.version, "inboxId": e.id}), true
}

func etag(v int) string { return fmt.Sprintf(`"%d"`, v) }

// inboxRoute serves GET /inbox and POST /inbox/{id}/discard for the
// caller; false when r is no inbox route.
func (s *Server) inboxRoute(q *req) bool {
	r := q.r
	s.mu.Lock()
	defer s.mu.Unlock()
	me := s.owner(q.cred)
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/inbox":
		entries := []map[string]string{}
		for _, e := range s.inbox {
			if e.owner == me && e.status == "waiting" {
				entries = append(entries, map[string]string{"id": e.id, "status": e.status})
			}
		}
		b, _ := json.Marshal(map[string]any{"entries": entries})
		write(q.w, 200, b)
		return true
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/inbox/") && strings.HasSuffix(r.URL.Path, "/discard"):
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/inbox/"), "/discard")
		for _, e := range s.inbox {
			if e.id == id && e.owner == me && e.status == "waiting" {
				e.status = "discarded"
				write(q.w, 200, []byte(`{"status":"discarded"}`))
				return true
			}
		}
		write(q.w, 404, envelopeBody("not_found", "no such inbox entry", nil))
		return true
	}
	return false
}
