package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/idemkit/idemkit/internal/apierr"
)

// seamIdemHold is the seams profile's idempotency hold: POST {key, holdMs}
// arms a hold on the caller's Idempotency-Key. The next createRun under
// that key, once it holds the Layer-1 claim, holds its answer for holdMs
// (1..60000) or until released, so a same-key duplicate sent meanwhile
// meets the request in flight however slow the machine is. holdMs 0
// releases the key's hold, armed or holding (an idemkit extension: a test
// ends the hold when it has seen what it needed instead of waiting it
// out). The answer is 200 {key, holdMs}.
const seamIdemHold = "/conformance/seams/sample/test/idempotency/hold"

// maxHoldMs bounds holdMs.
const maxHoldMs = 60000

// hold is one armed or holding idempotency hold.
type hold struct {
	d       time.Duration
	release chan struct{}
	once    sync.Once
}

func (h *hold) end() { h.once.Do(func() { close(h.release) }) }

// holds are the idempotency holds by tenant and key.
type holds struct {
	mu     sync.Mutex
	armed  map[string]*hold // not yet taken by a create
	taking map[string]*hold // held by a create now
}

func holdID(tenant, key string) string { return tenant + "\x00" + key }

// wait is the api handler's TestConfig.Hold: a create under an armed key
// takes its hold and waits it out (or its release, or ctx).
func (hs *holds) wait(ctx context.Context, tenant, key string) error {
	id := holdID(tenant, key)
	hs.mu.Lock()
	h := hs.armed[id]
	if h != nil {
		delete(hs.armed, id)
		hs.taking[id] = h
	}
	hs.mu.Unlock()
	if h == nil {
		return nil
	}
	defer func() {
		hs.mu.Lock()
		if hs.taking[id] == h {
			delete(hs.taking, id)
		}
		hs.mu.Unlock()
	}()
	t := time.NewTimer(h.d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-h.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// serve answers POST seamIdemHold.
func (hs *holds) serve(w http.ResponseWriter, r *http.Request, tenant string, body []byte) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeEnvelope(w, apierr.New(http.StatusMethodNotAllowed, "idemkit.method_not_allowed", "method not allowed; allowed: POST"))
		return
	}
	var in struct {
		Key    *string `json:"key"`
		HoldMs *int    `json:"holdMs"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || dec.More() || in.Key == nil || *in.Key == "" || in.HoldMs == nil || *in.HoldMs < 0 || *in.HoldMs > maxHoldMs {
		writeEnvelope(w, apierr.New(http.StatusBadRequest, apierr.CodeValidation, "the body must be {key: a non-empty string, holdMs: an integer 0..%d}", maxHoldMs))
		return
	}
	id := holdID(tenant, *in.Key)
	hs.mu.Lock()
	if h := hs.armed[id]; h != nil {
		delete(hs.armed, id)
		h.end()
	}
	if *in.HoldMs == 0 {
		if h := hs.taking[id]; h != nil {
			h.end()
		}
	} else {
		hs.armed[id] = &hold{d: time.Duration(*in.HoldMs) * time.Millisecond, release: make(chan struct{})}
	}
	hs.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"key": *in.Key, "holdMs": *in.HoldMs})
}
