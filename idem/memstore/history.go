package memstore

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/idemkit/idemkit/idem/decided"
)

// History is an in-memory decided.History: versioned records whose every
// Write is one new version (tests, examples, embedding). Safe for
// concurrent use.
type History struct {
	mu   sync.Mutex
	recs map[[2]string]decided.VersionLog
}

var _ decided.History = (*History)(nil)

// NewHistory returns an empty History.
func NewHistory() *History { return &History{recs: map[[2]string]decided.VersionLog{}} }

// Write records the next version of the record id in scope (version 1
// creates it) setting fields to their JSON encodings, and returns the new
// version.
func (h *History) Write(scope, id string, fields map[string]any) (int64, error) {
	v := make(map[string]json.RawMessage, len(fields))
	for f, x := range fields {
		b, err := json.Marshal(x)
		if err != nil {
			return 0, err
		}
		v[f] = b
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	k := [2]string{scope, id}
	h.recs[k] = append(h.recs[k], v)
	return h.recs[k].Current(), nil
}

// ChangesSince implements decided.History.
func (h *History) ChangesSince(_ context.Context, scope, id string, version int64) ([]decided.FieldChange, int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.recs[[2]string{scope, id}]
	if !ok {
		return nil, 0, decided.ErrRecordNotFound
	}
	changes, err := l.Since(version)
	return changes, l.Current(), err
}
