package soak

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"sync"
	"time"
)

// Attempt is one request a soak client made, and what it got.
type Attempt struct {
	// Client numbers the client goroutine (for a visualisation).
	Client int `json:"client"`
	// Key is the Idempotency-Key (with the tenant, when a soak uses
	// several: the record's scope).
	Key string `json:"key"`
	// Body is a digest of the request body (Digest).
	Body string `json:"body"`
	// Start and End are nanoseconds since the soak began: when the request
	// was sent and when its answer was read (End is ignored when Answered
	// is false).
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Answered is false when no answer came back (the connection broke or
	// the client gave up): the request may or may not have taken effect.
	Answered bool `json:"answered"`
	// GaveUp is when a request without an answer stopped waiting (the
	// error's time), nanoseconds since the soak began.
	GaveUp int64 `json:"gaveUp,omitempty"`
	// Status, Code (the error envelope's "error"), Replayed (the replay
	// marker) and Answer (a digest of the answer's body) describe the
	// answer.
	Status   int    `json:"status,omitempty"`
	Code     string `json:"code,omitempty"`
	Replayed bool   `json:"replayed,omitempty"`
	Answer   string `json:"answer,omitempty"`
	// RunID is the answer's runId, if any.
	RunID string `json:"runId,omitempty"`
}

// Kind is what an answer means to the model.
type Kind int

const (
	// KindUnknown: no answer; it may or may not have taken effect.
	KindUnknown Kind = iota
	// KindFinal: a recorded answer (2xx, or a deterministic 4xx).
	KindFinal
	// KindInFlight: 409 idempotency_in_flight.
	KindInFlight
	// KindMismatch: idempotency_key_mismatch.
	KindMismatch
	// KindTransient: a 5xx or a 429, never recorded.
	KindTransient
)

// Error codes the model reads.
const (
	CodeInFlight = "idempotency_in_flight"
	CodeMismatch = "idempotency_key_mismatch"
)

// Kind classifies the attempt's answer.
func (a Attempt) Kind() Kind {
	switch {
	case !a.Answered:
		return KindUnknown
	case a.Code == CodeInFlight:
		return KindInFlight
	case a.Code == CodeMismatch:
		return KindMismatch
	case a.Status >= 500 || a.Status == 429:
		return KindTransient
	default:
		return KindFinal
	}
}

// Digest is the short digest a history keeps of a body.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

// Recorder collects attempts from many goroutines.
type Recorder struct {
	t0       time.Time
	mu       sync.Mutex
	attempts []Attempt
}

// NewRecorder starts a history at now.
func NewRecorder() *Recorder { return &Recorder{t0: time.Now()} }

// Now is the time since the history began, in nanoseconds (monotonic).
func (r *Recorder) Now() int64 { return int64(time.Since(r.t0)) }

// Add records an attempt.
func (r *Recorder) Add(a Attempt) {
	if !a.Answered {
		a.End = math.MaxInt64
	}
	r.mu.Lock()
	r.attempts = append(r.attempts, a)
	r.mu.Unlock()
}

// Attempts returns a copy of the history.
func (r *Recorder) Attempts() []Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Attempt(nil), r.attempts...)
}

// WriteJSONL writes the history, one attempt a line.
func (r *Recorder) WriteJSONL(w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, a := range r.Attempts() {
		if err := enc.Encode(a); err != nil {
			return err
		}
	}
	return nil
}
