// Package conformtest is a small, correct Layer-1 API (POST /runs and
// GET /runs/{id} behind bearer API keys, with the conformance-noop and
// conformance-delay fixtures) whose Breaks switch off one rule at a time. It
// is the reference that `idemkit conform` is tested against: each break must
// fail exactly the matching scenario.
package conformtest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idemkit/internal/ids"
)

// Breaks switches off one Layer-1 rule of Server each. The zero value is a
// correct server.
type Breaks struct {
	NoReplayMarker       bool // replays carry no (openwop) or a "false" (ERP policy) marker
	MismatchLeaks        bool // the mismatch 409 embeds the cached body
	MismatchReplays      bool // a different body under a used key gets the cached answer
	InFlightRunsTwice    bool // a duplicate in flight runs the request again
	InFlightNoRetryAfter bool // the in-flight 409 has no Retry-After
	InFlightLeaseRetry   bool // the in-flight 409's Retry-After is a 300 s lease though the first request is running
	InFlightRetryDetails bool // the in-flight 409 puts retry timing in details
	GetHonoursKey        bool // GET goes through the idempotency layer
	SharedTenants        bool // records are keyed without the tenant
	CacheValidation      bool // 400 validation_error is cached
	AcceptBadKeys        bool // the key grammar is not checked
	NoKeyEcho            bool // ERP policy: the key is not echoed
	RejectValidKeys      bool // keys longer than 64 characters are rejected
	AcceptDuplicateKeys  bool // ERP policy: several Idempotency-Key headers are accepted (the first wins)
	ReplayReruns         bool // a same-key repeat runs the request again and is marked as a replay
	MarkFirstAsReplay    bool // a first execution carries the replay marker "true"
	StaleRequestID       bool // ERP policy: a replay's X-Request-ID is the first request's
	MismatchWrongCode    bool // the mismatch 409 carries another error code
	InFlightWrongCode    bool // the in-flight 409 carries another error code
	GetValidatesKey      bool // GET rejects a malformed Idempotency-Key (but caches nothing)
	AcceptInvalidBody    bool // the request is not validated: no validation error ever

	// WaitInFlight is a mode, not a break: a duplicate in flight waits
	// (bounded) for the winner's final answer instead of getting 409.
	WaitInFlight bool
}

// API keys of the two tenants Server knows.
const (
	APIKey1 = "key-tenant-1"
	APIKey2 = "key-tenant-2"
)

// Profiles.
const (
	OpenWOP = "openwop"
	Seed003 = "seed003"
)

// Server is the reference API. It is safe for concurrent use.
type Server struct {
	profile string
	brk     Breaks
	tenants map[string]string // API key -> tenant

	mu      sync.Mutex
	records map[string]*refRecord
	runs    map[string]string // runId -> tenant
	execs   int               // createRun executions
}

type refRecord struct {
	digest string
	done   bool
	status int
	body   []byte
	reqID  string
}

// New returns a Server following profile (OpenWOP, or Seed003 for the ERP policy) with the given
// rules broken.
func New(profile string, b Breaks) *Server {
	return &Server{
		profile: profile, brk: b,
		tenants: map[string]string{APIKey1: "t1", APIKey2: "t2"},
		records: map[string]*refRecord{}, runs: map[string]string{},
	}
}

type handlerFunc func(r *http.Request, tenant string, body []byte) (int, []byte)

func randID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func envelopeBody(code, msg string, details map[string]any) []byte {
	m := map[string]any{"error": code, "message": msg}
	if details != nil {
		m["details"] = details
	}
	b, _ := json.Marshal(m)
	return b
}

func write(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := "req-" + randID()
	if s.profile == Seed003 {
		w.Header().Set("X-Request-ID", reqID)
	}
	tenant, ok := s.tenants[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if !ok {
		write(w, 401, envelopeBody("unauthenticated", "no or unknown API key", nil))
		return
	}
	if s.brk.SharedTenants {
		tenant = "shared"
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/runs":
		s.idempotent(w, r, tenant, "createRun", reqID, s.createRun)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/runs/"):
		if s.brk.GetHonoursKey {
			s.idempotent(w, r, tenant, "getRun", reqID, s.getRun)
			return
		}
		if vals := r.Header.Values("Idempotency-Key"); s.brk.GetValidatesKey && len(vals) > 0 && !s.validKey(vals) {
			write(w, 400, envelopeBody("idempotency_key_invalid", "bad Idempotency-Key", nil))
			return
		}
		body, _ := io.ReadAll(r.Body)
		st, b := s.getRun(r, tenant, body)
		write(w, st, b)
	default:
		write(w, 404, envelopeBody("not_found", "no such route", nil))
	}
}

var seed003Key = regexp.MustCompile(`^[A-Za-z0-9._:-]{8,128}$`)

func (s *Server) validKey(vals []string) bool {
	if s.brk.RejectValidKeys && len(vals[0]) > 64 {
		return false
	}
	if s.profile == Seed003 {
		return (len(vals) == 1 || s.brk.AcceptDuplicateKeys) && seed003Key.MatchString(vals[0])
	}
	return ids.ValidKey(vals[0])
}

// Executions returns how many times createRun ran.
func (s *Server) Executions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.execs
}

// Digest is the request digest the server compares: SHA-256 of the body's
// JSON re-encoded with sorted keys.
func Digest(body []byte) string {
	var v any
	if json.Unmarshal(body, &v) == nil {
		body, _ = json.Marshal(v) // sorted keys: good enough for a test server
	}
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}

func (s *Server) mark(w http.ResponseWriter, replay bool) {
	if s.brk.MarkFirstAsReplay {
		replay = true
	}
	switch {
	case s.profile == Seed003:
		w.Header().Set("Idempotency-Replayed", fmt.Sprint(replay && !s.brk.NoReplayMarker))
	case replay && !s.brk.NoReplayMarker:
		w.Header().Set("OpenWOP-Idempotent-Replay", "true")
	}
}

func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, tenant, op, reqID string, h handlerFunc) {
	body, _ := io.ReadAll(r.Body)
	vals := r.Header.Values("Idempotency-Key")
	if len(vals) == 0 {
		st, b := h(r, tenant, body)
		write(w, st, b)
		return
	}
	if !s.brk.AcceptBadKeys && !s.validKey(vals) {
		write(w, 400, envelopeBody("idempotency_key_invalid", "bad Idempotency-Key", nil))
		return
	}
	key := vals[0]
	if s.profile == Seed003 && !s.brk.NoKeyEcho {
		w.Header().Set("Idempotency-Key", key)
	}
	d := Digest(body)
	rk := tenant + "\x00" + op + "\x00" + key
	s.mu.Lock()
	rec := s.records[rk]
	if rec != nil {
		switch {
		case rec.digest != d && rec.done && s.brk.MismatchReplays:
		case rec.digest != d:
			var details map[string]any
			if s.brk.MismatchLeaks && rec.done {
				details = map[string]any{"cached": string(rec.body)}
			}
			s.mu.Unlock()
			code := "idempotency_key_mismatch"
			if s.brk.MismatchWrongCode {
				code = "conflict"
			}
			write(w, 409, envelopeBody(code, "key reused with another request", details))
			return
		case rec.done && s.brk.ReplayReruns:
			s.mu.Unlock()
			st, b := h(r, tenant, body)
			w.Header().Set("OpenWOP-Idempotent-Replay", "true")
			w.Header().Set("Idempotency-Replayed", "true")
			write(w, st, b)
			return
		case !rec.done && s.brk.InFlightRunsTwice:
			s.mu.Unlock()
			st, b := h(r, tenant, body)
			s.mark(w, false)
			write(w, st, b)
			return
		case !rec.done && s.brk.WaitInFlight:
			for deadline := time.Now().Add(10 * time.Second); !rec.done && time.Now().Before(deadline); {
				s.mu.Unlock()
				time.Sleep(10 * time.Millisecond)
				s.mu.Lock()
			}
			if !rec.done {
				s.mu.Unlock()
				w.Header().Set("Retry-After", "1")
				write(w, 409, envelopeBody("idempotency_in_flight", "same key in progress", nil))
				return
			}
		case !rec.done:
			s.mu.Unlock()
			switch {
			case s.brk.InFlightNoRetryAfter:
			case s.brk.InFlightLeaseRetry:
				w.Header().Set("Retry-After", "295")
			default:
				w.Header().Set("Retry-After", map[bool]string{true: "2", false: "1"}[s.profile == Seed003])
			}
			var details map[string]any
			if s.brk.InFlightRetryDetails {
				details = map[string]any{"retryAfterMs": 1000}
			}
			code := "idempotency_in_flight"
			if s.brk.InFlightWrongCode {
				code = "conflict"
			}
			write(w, 409, envelopeBody(code, "same key in progress", details))
			return
		}
		s.mu.Unlock()
		s.mark(w, true)
		if s.profile == Seed003 {
			w.Header().Set("Idempotency-Original-Request-ID", rec.reqID)
			if s.brk.StaleRequestID {
				w.Header().Set("X-Request-ID", rec.reqID)
			}
		}
		write(w, rec.status, rec.body)
		return
	}
	rec = &refRecord{digest: d, reqID: reqID}
	s.records[rk] = rec
	s.mu.Unlock()

	st, b := h(r, tenant, body)

	s.mu.Lock()
	cached := st >= 200 && st <= 299 ||
		st >= 400 && st <= 499 && st != 429 && st != 401 && st != 403 && (st != 400 || s.brk.CacheValidation)
	if cached {
		rec.done, rec.status, rec.body = true, st, b
	} else {
		delete(s.records, rk)
	}
	s.mu.Unlock()
	s.mark(w, false)
	if s.profile == Seed003 {
		w.Header().Set("Idempotency-Original-Request-ID", reqID)
	}
	write(w, st, b)
}

func (s *Server) createRun(r *http.Request, tenant string, body []byte) (int, []byte) {
	var req map[string]json.RawMessage
	if json.Unmarshal(body, &req) != nil {
		return 400, envelopeBody("validation_error", "body is not a JSON object", nil)
	}
	var wf string
	var inputs map[string]any
	for k, v := range req {
		switch k {
		case "workflowId":
			if json.Unmarshal(v, &wf) != nil {
				return 400, envelopeBody("validation_error", "workflowId is not a string", nil)
			}
		case "inputs":
			if json.Unmarshal(v, &inputs) != nil || inputs == nil {
				return 400, envelopeBody("validation_error", "inputs is not an object", nil)
			}
		default:
			return 400, envelopeBody("validation_error", "unknown member "+k, nil)
		}
	}
	if s.brk.AcceptInvalidBody && wf == "" {
		wf = "conformance-noop"
	}
	switch wf {
	case "conformance-noop":
	case "conformance-delay":
		ms, _ := inputs["delayMs"].(float64)
		time.Sleep(time.Duration(ms) * time.Millisecond)
	default:
		return 400, envelopeBody("validation_error", "workflowId missing or unknown", nil)
	}
	s.mu.Lock()
	s.execs++
	id := fmt.Sprintf("run-%d-%s", s.execs, randID())
	s.runs[id] = tenant
	s.mu.Unlock()
	b, _ := json.Marshal(map[string]string{"runId": id, "status": "pending", "eventsUrl": "/runs/" + id + "/events"})
	return 201, b
}

func (s *Server) getRun(r *http.Request, tenant string, body []byte) (int, []byte) {
	id := strings.TrimPrefix(r.URL.Path, "/runs/")
	s.mu.Lock()
	owner, ok := s.runs[id]
	s.mu.Unlock()
	if !ok || owner != tenant {
		return 404, envelopeBody("not_found", "no such run", nil)
	}
	b, _ := json.Marshal(map[string]string{"runId": id, "status": "completed"})
	return 200, b
}
