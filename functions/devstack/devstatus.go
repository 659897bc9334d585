package devstack

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/idemkit/idemkit/functions/executor/execfn"
)

// devStatusEvery is how often `idemkit dev` prints its status line while
// runs are being started.
const devStatusEvery = 30 * time.Second

// lagStatus is `idemkit dev`'s executor metrics: it keeps the start lag
// (execfn.MetricStartLag: a run's creation to its start) of the runs
// started since the last status line, passes every measurement on to next
// (the EMF recorder), and prints one status line per interval in which
// runs were started:
//
//	idemkit dev: status: executor lag (created -> started) last 120ms, max 3.2s over 57 runs in 30s
//
// so a stack falling behind its load shows it. Safe for concurrent use.
type lagStatus struct {
	next execfn.Metrics

	mu        sync.Mutex
	n         int
	last, max time.Duration
}

// Milliseconds implements execfn.Metrics.
func (s *lagStatus) Milliseconds(name string, ms float64, dims map[string]string) {
	if s.next != nil {
		s.next.Milliseconds(name, ms, dims)
	}
	if name != execfn.MetricStartLag {
		return
	}
	d := time.Duration(ms) * time.Millisecond
	s.mu.Lock()
	s.n++
	s.last, s.max = d, max(s.max, d)
	s.mu.Unlock()
}

// Count passes the executor's counters (MetricStaleRuns) on.
func (s *lagStatus) Count(name string, n float64, dims map[string]string) {
	if s.next != nil {
		s.next.Count(name, n, dims)
	}
}

// line returns the status line of the runs started since the last call
// over the interval every, and false when none was started.
func (s *lagStatus) line(every time.Duration) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return "", false
	}
	l := fmt.Sprintf("idemkit dev: status: executor lag (created -> started) last %s, max %s over %d runs in %s",
		s.last.Round(time.Millisecond), s.max.Round(time.Millisecond), s.n, every)
	s.n, s.last, s.max = 0, 0, 0
	return l, true
}

// run prints the status line to w every interval until ctx ends.
func (s *lagStatus) run(ctx context.Context, w io.Writer, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if l, ok := s.line(every); ok {
				fmt.Fprintln(w, l)
			}
		}
	}
}

// syncWriter serializes writes to w: `idemkit dev`'s stdout gets lines from
// start-up and from the status loop.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}
