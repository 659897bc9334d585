// Package conformtest is a small, correct Layer-1 API (POST /runs,
// GET /runs/{id} and POST /runs/{id}/cancel behind bearer API keys, with the
// conformance-noop, conformance-delay and conformance-unavailable fixtures,
// and the ERP policy's public test route) following one of three policies
// (OpenWOP, Commerce, ERP), whose Breaks switch off one rule at a time. It
// is the reference that `idemkit conform` is tested against: each break
// must fail exactly the matching scenario.
package conformtest

import (
	"bytes"
	"context"
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
	"unicode/utf8"

	"github.com/idemkit/idemkit/internal/ids"
)

// Breaks switches off one Layer-1 rule of Server each. The zero value is a
// correct server.
type Breaks struct {
	NoReplayMarker       bool // replays carry no (openwop, commerce) or a "false" (ERP policy) marker
	MismatchLeaks        bool // the mismatch 409 embeds the cached body
	MismatchReplays      bool // a different body under a used key gets the cached answer
	InFlightRunsTwice    bool // a duplicate in flight runs the request again
	AsyncRunsTwiceOnce   bool // commerce: the first async duplicate in flight runs the request again (a claim race the host loses once); later ones are answered as they should be
	InFlightNoRetryAfter bool // the in-flight 409 has no Retry-After
	InFlightLeaseRetry   bool // the in-flight 409's Retry-After is a 300 s lease though the first request is running
	InFlightRetryDetails bool // the in-flight 409 puts retry timing in details
	GetHonoursKey        bool // GET goes through the idempotency layer
	SharedTenants        bool // records are keyed without the tenant (openwop)
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

	// Commerce policy.
	SplitComma              bool // a key is cut at its first comma
	RejectNonASCII          bool // keys with non-ASCII characters are rejected
	OperationNotBound       bool // the operation is part of the scope instead of bound to the key: another operation runs
	ScopeWithoutNamespace   bool // records are keyed without the credential's namespace
	ScopeWithoutWorker      bool // records are keyed without the calling worker
	ForgetFailures          bool // a 5xx is not stored (retried, as under the OpenWOP default)
	RecordUnauthenticated   bool // a 401 under a key is recorded and replayed to the next caller of the key
	AsyncIgnored            bool // the wait-mode header is ignored: a duplicate in flight, async too, gets 409 idempotency_in_flight
	SyncInFlightConflict    bool // a sync duplicate whose wait ended gets 409 idempotency_in_flight, not the pending Action
	MismatchRuns            bool // the mismatch 409 is answered after the request ran anyway
	ReplayStoredBody        bool // a replay is the answer recorded at creation, not the Action as it is now
	ReplayStatusOneByte     bool // commerce: a replay names the Action the key created with one byte of its status changed ("Succeeded")
	ReplayTextPlain         bool // a replay carries the first answer's body byte for byte as text/plain, not its application/json
	AsyncNamesUnwrittenRun  bool // an async duplicate of a pending request names the run its first request will create before it is written (GET answers 404)
	AsyncNamesOtherRunByURL bool // an async duplicate of a pending request names, by a statusUrl alone (no runId), another run of the tenant that exists
	SyncNamesUnwrittenRun   bool // a sync duplicate whose wait ended names the run its first request will create before it is written (GET answers 404)
	AsyncStatusURLNoRun     bool // an async duplicate of a pending request names, by a statusUrl alone, the run its first request will create before it is written, and that URL answers 200 with a placeholder naming no run
	AsyncStatusURLElsewhere bool // an async duplicate of a pending request names its run by runId and by a statusUrl on another origin
	AsyncNoRetryAfter       bool // an async duplicate's pending answer has no Retry-After
	RetryUnlinked           bool // a retry's new run is not linked to the failed one by on
	IfMatchRefusesCurrent   bool // a write with any If-Match is refused as stale, the current version's too
	InboxTenantWide         bool // the inbox is the namespace's, not the calling worker's: another worker lists and discards its entries

	// ERP policy.
	AcceptKeyWhitespace      bool // leading/trailing whitespace around the key is ignored (needs HTTPTest to see it)
	RouteNotScoped           bool // the scope lacks the method and route: the key on another route is a conflict
	ScopeWithoutClient       bool // records are keyed without the client
	ScopeWithoutCompany      bool // records are keyed without the company
	ScopeWithoutOrganization bool // records are keyed without the organisation
	StoreFailures            bool // a 5xx is stored and replayed instead of failed_retryable
	ConflictMessageWrong     bool // the conflict 409's message is not the policy's text
	NoEnvelopeRequestID      bool // error envelopes carry no request_id
	InFlightRetryAfterOne    bool // the in-flight 409 says Retry-After: 1 instead of 2
	TestRouteNeedsAuth       bool // the test route requires a credential
	TestRouteIdempotent      bool // the test route goes through the idempotency layer
	GatewayNoRequestID       bool // the 401, 404, 405 and 415 made before any route runs carry no X-Request-ID nor request_id
	WorkOrderRawDigest       bool // the work-order route hashes the raw body: the same work order in XML conflicts with its JSON original
	WorkOrderIgnoresAccept   bool // a work-order replay answers JSON whatever the Accept
	WorkOrderLenient         bool // the work-order contract reads leniently: invalid UTF-8, unknown, duplicate and other-case members, Unicode case folding
	XMLErrorEnveloped        bool // a work-order error answered in XML is replaced by a JSON envelope without its request id, key echo and replay headers

	// APIGatewayAuthorizer is a mode, not a break: the 401 without a
	// credential is API Gateway's own, as behind the deployed stack's HTTP
	// API and its Lambda authorizer: {"message":"Unauthorized"} with an
	// apigw-requestid header, no X-Request-ID and no envelope.
	APIGatewayAuthorizer bool

	// RunBeforeDelay is a mode, not a break: the conformance-delay workflow
	// writes its run before its delay, not after it (as a host whose run is
	// written by its own write before the create answers), so that a
	// duplicate meanwhile is the pending Action naming that run.
	RunBeforeDelay bool

	// WaitInFlight is a mode, not a break: a duplicate in flight waits
	// (bounded) for the winner's final answer instead of getting 409. The
	// ERP policy forbids it (a duplicate gets 409 at once).
	WaitInFlight bool

	// SlowFirstAnswer is a mode, not a break: the first request's answer
	// is sent 100 ms after its record is completed, so that a duplicate
	// waiting on that record (WaitInFlight) is answered first, as on a host
	// whose waiters poll the record while the first answer is still on
	// its way to the client.
	SlowFirstAnswer bool

	// LateDuplicates is a mode, not a break: when N > 0, the duplicates of
	// the N-th conformance-delay request the server records are looked at
	// only once that request has finished, as on a loaded machine where a
	// duplicate sent while the first request runs reaches the host after
	// it ended. A correct host then answers them as replays, which a
	// client cannot tell from a host that held them.
	LateDuplicates int

	// LateFirst is a mode, not a break: when N > 0, the N-th
	// conformance-delay request sent without the wait-mode header (a
	// checker's first request, or an in-flight duplicate) is looked at
	// only 500 ms after it arrived, as on a loaded machine where a
	// duplicate sent after it reaches the host first and runs.
	LateFirst int
}

// API keys Server knows. APIKey1 and APIKey2 differ in every credential
// part; each of the others differs from APIKey1 in one part only.
const (
	APIKey1             = "key-tenant-1"
	APIKey2             = "key-tenant-2"
	APIKeyNamespace2    = "key-namespace-2"
	APIKeyWorker2       = "key-worker-2"
	APIKeyClient2       = "key-client-2"
	APIKeyCompany2      = "key-company-2"
	APIKeyOrganization2 = "key-organization-2"
)

// Profiles.
const (
	OpenWOP  = "openwop"
	ERP      = "erp"
	Commerce = "commerce"
)

// ModeHeader is the commerce policy's wait-mode request header ("sync",
// the default, or "async").
const ModeHeader = "Idempotency-Mode"

// TestRoutePath is the ERP policy's public format-validation route (POST).
const TestRoutePath = "/api/v1/inbound/work-orders/test"

// WorkOrderPath is the ERP policy's live work-order route (POST).
const WorkOrderPath = "/api/v1/inbound/work-orders"

// The ERP policy's conflict message.
const erpConflictMessage = "The Idempotency-Key has already been used with a different request payload."

// credential is what an API key authenticates.
type credential struct {
	tenant, worker, client, company, org string
}

// Server is the reference API. It is safe for concurrent use.
type Server struct {
	profile string
	brk     Breaks
	creds   map[string]credential

	mu      sync.Mutex
	records map[string]*refRecord
	runs    map[string]*refRun
	// placeholders: runs named (AsyncStatusURLNoRun) before they are
	// written, whose read answers 200 with no run.
	placeholders map[string]bool
	execs        int  // createRun executions
	slowRecords  int  // conformance-delay requests recorded (LateDuplicates)
	ranTwice     bool // an async duplicate ran the request again (AsyncRunsTwiceOnce)
	slowPlain    int  // conformance-delay requests without ModeHeader (LateFirst)
	inbox        []*inboxEntry
}

type refRun struct {
	tenant, status string
	on             string // the failed run a retry retries
	version        int    // 1 at creation, +1 per change (GET's ETag)
}

type refRecord struct {
	runID  string // commerce: the Action (run) the key's execution creates, named at the claim
	op     string // the operation the key is bound to
	digest string
	done   bool
	status int
	body   []byte
	reqID  string
	// late: its duplicates are looked at only once done (LateDuplicates).
	late bool
}

// New returns a Server following profile (OpenWOP, Commerce, or ERP
// for the ERP policy) with the given rules broken.
func New(profile string, b Breaks) *Server {
	c1 := credential{"t1", "w1", "c1", "co1", "o1"}
	with := func(f func(*credential)) credential { c := c1; f(&c); return c }
	return &Server{
		profile: profile, brk: b,
		creds: map[string]credential{
			APIKey1:             c1,
			APIKey2:             {"t2", "w2", "c2", "co2", "o2"},
			APIKeyNamespace2:    with(func(c *credential) { c.tenant = "t2" }),
			APIKeyWorker2:       with(func(c *credential) { c.worker = "w2" }),
			APIKeyClient2:       with(func(c *credential) { c.client = "c2" }),
			APIKeyCompany2:      with(func(c *credential) { c.company = "co2" }),
			APIKeyOrganization2: with(func(c *credential) { c.org = "o2" }),
		},
		records: map[string]*refRecord{}, runs: map[string]*refRun{},
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

// req is one request being served.
type req struct {
	w     http.ResponseWriter
	r     *http.Request
	id    string // the attempt id (X-Request-ID under the ERP policy)
	cred  credential
	rawWS bool // the raw Idempotency-Key header had surrounding whitespace
	// workOrder: the ERP policy's live work-order route (canonical hash,
	// answers rendered for the Accept).
	workOrder bool
}

// fail writes an error envelope.
func (s *Server) fail(q *req, status int, code, msg string, details map[string]any) {
	s.respond(q, status, envelopeBody(code, msg, details))
}

// respond writes an answer; under the ERP policy an error envelope gets the
// current attempt's request_id (also on a replay).
func (s *Server) respond(q *req, status int, body []byte) {
	if q.workOrder && s.renderWorkOrder(q, status, body) {
		return
	}
	if s.profile == ERP && status >= 400 && !s.brk.NoEnvelopeRequestID {
		var m map[string]any
		if json.Unmarshal(body, &m) == nil && m["error"] != nil {
			m["request_id"] = q.id
			body, _ = json.Marshal(m)
		}
	}
	write(q.w, status, body)
}

// code is the profile's error code for a meaning.
func (s *Server) code(meaning string) string {
	switch s.profile {
	case ERP:
		return map[string]string{"invalid": "IDEMPOTENCY_KEY_INVALID", "mismatch": "IDEMPOTENCY_KEY_CONFLICT", "inflight": "IDEMPOTENCY_REQUEST_IN_PROGRESS"}[meaning]
	case Commerce:
		return map[string]string{"invalid": "idempotency-key-invalid", "mismatch": "idempotency-mismatch", "inflight": "idempotency-in-flight"}[meaning]
	}
	return map[string]string{"invalid": "idempotency_key_invalid", "mismatch": "idempotency_key_mismatch", "inflight": "idempotency_in_flight"}[meaning]
}

func write(w http.ResponseWriter, status int, body []byte) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ws, untracked := rawKey(r)
	q := &req{w: w, r: r, id: "req-" + randID(), rawWS: ws}
	if s.profile == ERP {
		w.Header().Set("X-Request-ID", q.id)
	}
	if untracked {
		// The request's header block as received is not known: refused
		// rather than served under a guessed key.
		s.fail(q, 400, "validation_error", "the request's header block could not be read as received", nil)
		return
	}
	if r.Method == http.MethodPost && r.URL.Path == TestRoutePath {
		s.testRoute(q)
		return
	}
	cred, ok := s.creds[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if !ok {
		if k := r.Header.Get("Idempotency-Key"); k != "" && s.brk.RecordUnauthenticated {
			s.mu.Lock()
			s.records["door\x00"+k] = &refRecord{done: true, status: 401, body: envelopeBody("unauthenticated", "no or unknown API key", nil)}
			s.mu.Unlock()
		}
		s.gatewayFail(q, 401, "unauthenticated", "no or unknown API key")
		return
	}
	if st, code, msg := s.gateway(r); st != 0 {
		s.gatewayFail(q, st, code, msg)
		return
	}
	if s.brk.SharedTenants {
		cred.tenant = "shared"
	}
	q.cred = cred
	q.r = r.WithContext(context.WithValue(r.Context(), credKey{}, cred))
	r = q.r
	if s.profile == Commerce && s.inboxRoute(q) {
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/runs":
		s.idempotent(q, s.createRun)
	case s.profile == ERP && r.Method == http.MethodPost && r.URL.Path == WorkOrderPath:
		q.workOrder = true
		s.idempotent(q, s.workOrder)
	case s.profile == Commerce && r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/runs/") && strings.HasSuffix(r.URL.Path, "/retry"):
		s.idempotent(q, s.retryRun)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/runs/") && strings.HasSuffix(r.URL.Path, "/cancel"):
		s.idempotent(q, s.cancelRun)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/runs/"):
		s.mu.Lock()
		if run := s.runs[strings.TrimPrefix(r.URL.Path, "/runs/")]; run != nil && run.tenant == cred.tenant {
			w.Header().Set("ETag", etag(run.version))
		}
		s.mu.Unlock()
		if s.brk.GetHonoursKey {
			s.idempotent(q, s.getRun)
			return
		}
		if vals := r.Header.Values("Idempotency-Key"); s.brk.GetValidatesKey && len(vals) > 0 && !s.validKey(vals[0]) {
			s.fail(q, 400, s.code("invalid"), "bad Idempotency-Key", nil)
			return
		}
		body, _ := io.ReadAll(r.Body)
		st, b := s.getRun(r, cred.tenant, body)
		s.respond(q, st, b)
	default:
		s.gatewayFail(q, 404, "not_found", "no such route")
	}
}

// gateway is what the gateway answers before any route runs: 405 for a
// known path with another method, 415 for a POST body that is not JSON
// (nor XML on the ERP policy's work-order route); 0 when the route runs.
func (s *Server) gateway(r *http.Request) (status int, code, msg string) {
	p := r.URL.Path
	known := p == "/runs" || strings.HasPrefix(p, "/runs/") || p == WorkOrderPath
	if known && r.Method != http.MethodPost && r.Method != http.MethodGet || (p == "/runs" || p == WorkOrderPath) && r.Method == http.MethodGet {
		return 405, "method_not_allowed", "method not allowed on this route"
	}
	if r.Method == http.MethodPost && r.ContentLength != 0 {
		ct := strings.ToLower(strings.TrimSpace(strings.Split(r.Header.Get("Content-Type"), ";")[0]))
		if ct != "application/json" && ct != "" && !(p == WorkOrderPath && (ct == "application/xml" || ct == "text/xml")) {
			return 415, "unsupported_media_type", "the body must be application/json"
		}
	}
	return 0, "", ""
}

// gatewayFail is an answer of the gateway (401, 404, 405, 415): under the
// ERP policy with its X-Request-ID and request_id, unless broken.
func (s *Server) gatewayFail(q *req, status int, code, msg string) {
	switch {
	case status == http.StatusUnauthorized && s.brk.APIGatewayAuthorizer:
		q.w.Header().Del("X-Request-ID")
		q.w.Header().Set("Apigw-Requestid", "Z"+q.id)
		write(q.w, status, []byte(`{"message":"Unauthorized"}`))
	case s.profile != ERP:
		s.fail(q, status, code, msg, nil)
	case s.brk.GatewayNoRequestID:
		q.w.Header().Del("X-Request-ID")
		write(q.w, status, envelopeBody(code, msg, nil))
	default: // the gateway's own envelope (NoEnvelopeRequestID breaks Layer 1's)
		b, _ := json.Marshal(map[string]any{"error": code, "message": msg, "request_id": q.id})
		write(q.w, status, b)
	}
}

// testRoute is the ERP policy's format-validation route: public, no key
// needed, no record.
func (s *Server) testRoute(q *req) {
	if s.brk.TestRouteNeedsAuth {
		if _, ok := s.creds[strings.TrimPrefix(q.r.Header.Get("Authorization"), "Bearer ")]; !ok {
			s.fail(q, 401, "unauthenticated", "no or unknown API key", nil)
			return
		}
	}
	h := func(r *http.Request, _ string, body []byte) (int, []byte) {
		var obj map[string]any
		if json.Unmarshal(body, &obj) != nil || obj == nil {
			return 400, envelopeBody("VALIDATION_ERROR", "the body must be a JSON object", nil)
		}
		return 200, []byte(`{"valid":true}`)
	}
	if s.brk.TestRouteIdempotent {
		q.cred = credential{tenant: "anonymous"}
		s.idempotent(q, h)
		return
	}
	body, _ := io.ReadAll(q.r.Body)
	st, b := h(q.r, "", body)
	s.respond(q, st, b)
}

var erpKey = regexp.MustCompile(`^[A-Za-z0-9._:-]{8,128}$`)

func (s *Server) validKey(k string) bool {
	if s.brk.RejectValidKeys && utf8.RuneCountInString(k) > 64 {
		return false
	}
	switch s.profile {
	case ERP:
		return erpKey.MatchString(k)
	case Commerce:
		if s.brk.RejectNonASCII {
			for i := 0; i < len(k); i++ {
				if k[i] >= 0x80 {
					return false
				}
			}
		}
		n := utf8.RuneCountInString(k)
		return utf8.ValidString(k) && n >= 1 && n <= 255
	}
	return ids.ValidKey(k)
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
	case s.profile == ERP:
		w.Header().Set("Idempotency-Replayed", fmt.Sprint(replay && !s.brk.NoReplayMarker))
	case replay && !s.brk.NoReplayMarker && s.profile == Commerce:
		w.Header().Set("Idempotent-Replayed", "true")
	case replay && !s.brk.NoReplayMarker:
		w.Header().Set("OpenWOP-Idempotent-Replay", "true")
	}
}

// scope is the record key's scope and the operation bound to the key.
func (s *Server) scope(q *req) (scope, op string) {
	c := q.cred
	op = q.r.Method + " " + q.r.URL.Path
	switch s.profile {
	case Commerce:
		ns, wk := c.tenant, c.worker
		if s.brk.ScopeWithoutNamespace {
			ns = "*"
		}
		if s.brk.ScopeWithoutWorker {
			wk = "*"
		}
		scope = ns + "\x00" + wk
		if s.brk.OperationNotBound {
			scope += "\x00" + op
		}
		return scope, op
	case ERP:
		cl, co, org := c.client, c.company, c.org
		if s.brk.ScopeWithoutClient {
			cl = "*"
		}
		if s.brk.ScopeWithoutCompany {
			co = "*"
		}
		if s.brk.ScopeWithoutOrganization {
			org = "*"
		}
		scope = cl + "\x00" + co + "\x00" + org
		if !s.brk.RouteNotScoped {
			scope += "\x00" + op
		}
		return scope, op
	}
	return c.tenant + "\x00" + op, op
}

// cached reports whether an outcome is stored (and replayed).
func (s *Server) cached(st int) bool {
	switch {
	case st >= 500:
		return s.profile == Commerce && !s.brk.ForgetFailures || s.profile != Commerce && s.brk.StoreFailures
	case st == 429 || st == 401 || st == 403:
		return false
	case st == 400:
		return s.brk.CacheValidation
	}
	return true
}

func (s *Server) idempotent(q *req, h handlerFunc) {
	w, r := q.w, q.r
	body, _ := io.ReadAll(r.Body)
	vals := r.Header.Values("Idempotency-Key")
	if len(vals) == 0 {
		st, b := h(r, q.cred.tenant, body)
		s.respond(q, st, b)
		return
	}
	switch {
	case len(vals) > 1 && !s.brk.AcceptDuplicateKeys:
		s.fail(q, 400, s.code("invalid"), "several Idempotency-Key headers", nil)
		return
	case s.profile == ERP && q.rawWS && !s.brk.AcceptKeyWhitespace:
		s.fail(q, 400, s.code("invalid"), "whitespace around the Idempotency-Key", nil)
		return
	case !s.brk.AcceptBadKeys && !s.validKey(vals[0]):
		s.fail(q, 400, s.code("invalid"), "bad Idempotency-Key", nil)
		return
	}
	key := vals[0]
	if s.brk.SplitComma {
		key, _, _ = strings.Cut(key, ",")
	}
	if s.profile == ERP && !s.brk.NoKeyEcho {
		w.Header().Set("Idempotency-Key", key)
	}
	d := Digest(body)
	if q.workOrder {
		// The contract is read before any claim: a body it refuses is a
		// 400 that records nothing (not under the lenient break, whose
		// handler refuses it after the claim).
		if _, ok := s.decodeWorkOrder(r, body); !ok && !s.brk.WorkOrderLenient {
			s.fail(q, 400, "VALIDATION_ERROR", "not a work order", nil)
			return
		}
		d = s.workOrderDigest(r, body)
	}
	scope, op := s.scope(q)
	rk := scope + "\x00" + key
	if s.brk.LateFirst > 0 && r.Header.Get(ModeHeader) == "" && bytes.Contains(body, []byte(`"conformance-delay"`)) {
		s.mu.Lock()
		s.slowPlain++
		late := s.slowPlain == s.brk.LateFirst
		s.mu.Unlock()
		if late {
			time.Sleep(500 * time.Millisecond)
		}
	}
	s.mu.Lock()
	rec := s.records[rk]
	if door := s.records["door\x00"+key]; door != nil && s.brk.RecordUnauthenticated {
		rec = door
	}
	if rec != nil && rec.late && rec.digest == d {
		for deadline := time.Now().Add(time.Minute); !rec.done && s.records[rk] == rec && time.Now().Before(deadline); {
			s.mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			s.mu.Lock()
		}
	}
	if rec != nil {
		switch {
		case rec.digest != d && rec.op == op && rec.done && s.brk.MismatchReplays:
		case rec.op != "" && (rec.digest != d || rec.op != op):
			var details map[string]any
			if s.brk.MismatchLeaks && rec.done {
				details = map[string]any{"cached": string(rec.body)}
			}
			s.mu.Unlock()
			if s.brk.MismatchRuns {
				h(r, q.cred.tenant, body)
			}
			code, msg := s.code("mismatch"), "key reused with another request"
			if s.profile == ERP && !s.brk.ConflictMessageWrong {
				msg = erpConflictMessage
			}
			if s.brk.MismatchWrongCode {
				code = "conflict"
			}
			s.fail(q, 409, code, msg, details)
			return
		case rec.done && s.brk.ReplayReruns:
			s.mu.Unlock()
			st, b := h(r, q.cred.tenant, body)
			w.Header().Set("OpenWOP-Idempotent-Replay", "true")
			w.Header().Set("Idempotency-Replayed", "true")
			w.Header().Set("Idempotent-Replayed", "true")
			s.respond(q, st, b)
			return
		case !rec.done && (s.brk.InFlightRunsTwice || s.brk.AsyncRunsTwiceOnce && !s.ranTwice && strings.EqualFold(r.Header.Get(ModeHeader), "async")):
			s.ranTwice = true
			s.mu.Unlock()
			st, b := h(r, q.cred.tenant, body)
			s.mark(w, false)
			if s.profile == ERP {
				w.Header().Set("Idempotency-Original-Request-ID", q.id)
			}
			s.respond(q, st, b)
			return
		case !rec.done && s.profile == Commerce && !s.brk.AsyncIgnored && strings.EqualFold(r.Header.Get(ModeHeader), "async"):
			b := s.pendingAnswer(rec, s.brk.AsyncNamesUnwrittenRun)
			switch {
			case s.brk.AsyncNamesOtherRunByURL:
				b = s.otherRunByURL(q.cred.tenant, rec.runID)
			case s.brk.AsyncStatusURLNoRun && rec.runID != "" && s.runs[rec.runID] == nil:
				if s.placeholders == nil {
					s.placeholders = map[string]bool{}
				}
				s.placeholders[rec.runID] = true
				b, _ = json.Marshal(map[string]string{"status": "pending", "statusUrl": "/runs/" + rec.runID})
			case s.brk.AsyncStatusURLElsewhere && rec.runID != "":
				var v map[string]any
				_ = json.Unmarshal(b, &v)
				v["runId"], v["statusUrl"] = rec.runID, "https://status.elsewhere.invalid/runs/"+rec.runID
				b, _ = json.Marshal(v)
			}
			s.mu.Unlock()
			s.mark(w, true)
			if !s.brk.AsyncNoRetryAfter {
				w.Header().Set("Retry-After", "1")
			}
			s.respond(q, 202, b)
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
				s.fail(q, 409, s.code("inflight"), "same key in progress", nil)
				return
			}
		case !rec.done && s.profile == Commerce && !s.brk.AsyncIgnored && !s.brk.SyncInFlightConflict:
			// The commerce policy: a sync duplicate whose wait ended (this
			// server waits for none) is answered the pending Action too.
			b := s.pendingAnswer(rec, s.brk.SyncNamesUnwrittenRun)
			s.mu.Unlock()
			s.mark(w, true)
			switch {
			case s.brk.InFlightNoRetryAfter:
			case s.brk.InFlightLeaseRetry:
				w.Header().Set("Retry-After", "295")
			default:
				w.Header().Set("Retry-After", "1")
			}
			s.respond(q, 202, b)
			return
		case !rec.done:
			s.mu.Unlock()
			switch {
			case s.brk.InFlightNoRetryAfter:
			case s.brk.InFlightLeaseRetry:
				w.Header().Set("Retry-After", "295")
			case s.profile == ERP && !s.brk.InFlightRetryAfterOne:
				w.Header().Set("Retry-After", "2")
			default:
				w.Header().Set("Retry-After", "1")
			}
			var details map[string]any
			if s.brk.InFlightRetryDetails {
				details = map[string]any{"retryAfterMs": 1000}
			}
			code := s.code("inflight")
			if s.brk.InFlightWrongCode {
				code = "conflict"
			}
			s.fail(q, 409, code, "same key in progress", details)
			return
		}
		body := rec.body
		if run := s.runs[rec.runID]; s.profile == Commerce && rec.status == 201 && run != nil && !s.brk.ReplayStoredBody {
			// The commerce policy: a replay is the Action as it is now.
			st := run.status
			if s.brk.ReplayStatusOneByte && st != "" {
				st = strings.ToUpper(st[:1]) + st[1:]
			}
			body = s.action(rec.runID, st)
		}
		s.mu.Unlock()
		s.mark(w, true)
		if s.brk.ReplayTextPlain && !q.workOrder {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		}
		if s.profile == ERP {
			w.Header().Set("Idempotency-Original-Request-ID", rec.reqID)
			if s.brk.StaleRequestID {
				w.Header().Set("X-Request-ID", rec.reqID)
			}
		}
		s.respond(q, rec.status, body)
		return
	}
	rec = &refRecord{op: op, digest: d, reqID: q.id}
	if bytes.Contains(body, []byte(`"conformance-delay"`)) {
		s.slowRecords++
		rec.late = s.slowRecords == s.brk.LateDuplicates
	}
	if s.profile == Commerce {
		rec.runID = "run-" + randID()
	}
	s.records[rk] = rec
	s.mu.Unlock()

	st, b := h(r.WithContext(context.WithValue(r.Context(), recordKey{}, rec)), q.cred.tenant, body)

	s.mu.Lock()
	if s.cached(st) {
		rec.done, rec.status, rec.body = true, st, b
	} else {
		delete(s.records, rk)
	}
	s.mu.Unlock()
	if s.brk.SlowFirstAnswer {
		time.Sleep(100 * time.Millisecond)
	}
	s.mark(w, false)
	if s.profile == ERP {
		w.Header().Set("Idempotency-Original-Request-ID", q.id)
	}
	s.respond(q, st, b)
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
	failsLater := false
	var delay time.Duration // after the run is written (RunBeforeDelay)
	switch wf {
	case FailsLaterWorkflow:
		failsLater = true
	case "conformance-noop":
	case "conformance-delay":
		ms, _ := inputs["delayMs"].(float64)
		if delay = time.Duration(ms) * time.Millisecond; !s.brk.RunBeforeDelay {
			time.Sleep(delay)
			delay = 0
		}
	case "conformance-unavailable":
		return 503, envelopeBody("runner_unavailable", "the conformance-unavailable workflow never has a runner", nil)
	default:
		return 400, envelopeBody("validation_error", "workflowId missing or unknown", nil)
	}
	s.mu.Lock()
	s.execs++
	id := fmt.Sprintf("run-%d-%s", s.execs, randID())
	if rec, ok := r.Context().Value(recordKey{}).(*refRecord); ok && rec.runID != "" {
		id = rec.runID // the Action the claim named
	}
	s.runs[id] = &refRun{tenant: tenant, status: "pending", version: 1}
	if failsLater {
		// It fails once created: its answer is the pending run.
		s.runs[id].status, s.runs[id].version = "failed", 2
	}
	s.mu.Unlock()
	time.Sleep(delay)
	return 201, s.action(id, "pending")
}

// FailsLaterWorkflow is the reference server's workflow whose run is
// created (201, pending) and then fails.
const FailsLaterWorkflow = "conformance-fails-later"

// retryRun is Action.retry: a new pending run linked to the failed one by
// on (commerce).
func (s *Server) retryRun(r *http.Request, tenant string, _ []byte) (int, []byte) {
	prev := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/runs/"), "/retry")
	s.mu.Lock()
	defer s.mu.Unlock()
	run, ok := s.runs[prev]
	if !ok || run.tenant != tenant {
		return 404, envelopeBody("not_found", "no such run", nil)
	}
	if run.status != "failed" {
		return 409, envelopeBody("run_not_failed", "only a failed run is retried", nil)
	}
	id := "run-" + randID()
	if rec, ok := r.Context().Value(recordKey{}).(*refRecord); ok && rec.runID != "" {
		id = rec.runID
	}
	n := &refRun{tenant: tenant, status: "pending", version: 1}
	if !s.brk.RetryUnlinked {
		n.on = prev
	}
	s.runs[id] = n
	m := map[string]string{"runId": id, "status": "pending"}
	if n.on != "" {
		m["on"] = n.on
	}
	b, _ := json.Marshal(m)
	return 201, b
}

// pendingAnswer is the commerce policy's answer to a duplicate of rec's
// request while it still executes (s.mu held): the pending Action, its run
// as it is now, once that run is written; until then (conformance-delay
// writes its run only after its delay) the pending answer, which names no
// run, so that a duplicate is never told a run GET does not find. unwritten
// names the run before it is written (a break).
func (s *Server) pendingAnswer(rec *refRecord, unwritten bool) []byte {
	if run := s.runs[rec.runID]; rec.runID != "" && run != nil {
		return s.action(rec.runID, run.status)
	}
	if rec.runID != "" && unwritten {
		return s.action(rec.runID, "pending")
	}
	b, _ := json.Marshal(map[string]string{"status": "pending", "requestId": rec.reqID})
	return b
}

// otherRunByURL is a pending answer naming, by its statusUrl alone, a run
// of tenant other than not (one is written when the tenant has none); the
// caller holds s.mu.
func (s *Server) otherRunByURL(tenant, not string) []byte {
	other := ""
	for id, run := range s.runs {
		if id != not && run.tenant == tenant {
			other = id
			break
		}
	}
	if other == "" {
		other = "run-other-" + tenant
		s.runs[other] = &refRun{tenant: tenant, status: "completed", version: 1}
	}
	b, _ := json.Marshal(map[string]string{"status": "pending", "statusUrl": "/runs/" + other})
	return b
}

// recordKey carries a request's record to its handler.
type recordKey struct{}

// action is createRun's answer for run id in status st.
func (s *Server) action(id, st string) []byte {
	b, _ := json.Marshal(map[string]string{"runId": id, "status": st, "eventsUrl": "/runs/" + id + "/events"})
	return b
}

func (s *Server) getRun(r *http.Request, tenant string, body []byte) (int, []byte) {
	id := strings.TrimPrefix(r.URL.Path, "/runs/")
	s.mu.Lock()
	run, ok := s.runs[id]
	var st, on string
	if ok {
		st, on = run.status, run.on
	}
	placeholder := !ok && s.placeholders[id]
	s.mu.Unlock()
	if placeholder {
		return 200, []byte(`{"status":"pending"}`)
	}
	if !ok || run.tenant != tenant {
		return 404, envelopeBody("not_found", "no such run", nil)
	}
	m := map[string]string{"runId": id, "status": st}
	if on != "" {
		m["on"] = on
	}
	b, _ := json.Marshal(m)
	return 200, b
}

func (s *Server) cancelRun(r *http.Request, tenant string, body []byte) (int, []byte) {
	id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/runs/"), "/cancel")
	s.mu.Lock()
	defer s.mu.Unlock()
	run, ok := s.runs[id]
	if !ok || run.tenant != tenant {
		return 404, envelopeBody("not_found", "no such run", nil)
	}
	if st, b, stale := s.staleCancel(r, run); stale {
		return st, b
	}
	if s.profile == Commerce && run.status == "cancelled" {
		return 409, envelopeBody("run_terminal", "the run has ended", nil)
	}
	if run.status != "cancelled" {
		run.version++
	}
	run.status = "cancelled"
	b, _ := json.Marshal(map[string]string{"runId": id, "status": run.status})
	return 200, b
}
