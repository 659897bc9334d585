// Package emf writes CloudWatch Embedded Metric Format records: one JSON
// line per metric to a writer (stdout in Lambda), which CloudWatch Logs turns
// into metrics. Dimensions must be bounded (never keys, tenants or ids).
package emf

import (
	"encoding/json"
	"io"
	"sort"
	"sync"
	"time"
)

// Recorder emits EMF records. The zero value is unusable; use New.
// It is safe for concurrent use.
type Recorder struct {
	mu        sync.Mutex
	w         io.Writer
	namespace string
	now       func() time.Time
}

// New returns a Recorder writing to w under namespace (default "idemkit").
func New(w io.Writer, namespace string) *Recorder {
	if namespace == "" {
		namespace = "idemkit"
	}
	return &Recorder{w: w, namespace: namespace, now: time.Now}
}

// Count emits a Count metric named name with value n and bounded dimensions.
func (r *Recorder) Count(name string, n float64, dims map[string]string) {
	r.emit(name, "Count", n, dims)
}

// Milliseconds emits a Milliseconds metric (a duration, e.g. a lag) named
// name with value ms and bounded dimensions.
func (r *Recorder) Milliseconds(name string, ms float64, dims map[string]string) {
	r.emit(name, "Milliseconds", ms, dims)
}

func (r *Recorder) emit(name, unit string, n float64, dims map[string]string) {
	if r == nil || r.w == nil {
		return
	}
	keys := make([]string, 0, len(dims))
	for k := range dims {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rec := map[string]any{
		"_aws": map[string]any{
			"Timestamp": r.now().UnixMilli(),
			"CloudWatchMetrics": []any{map[string]any{
				"Namespace":  r.namespace,
				"Dimensions": [][]string{keys},
				"Metrics":    []any{map[string]string{"Name": name, "Unit": unit}},
			}},
		},
		name: n,
	}
	for k, v := range dims {
		rec[k] = v
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	b = append(b, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.w.Write(b)
}
