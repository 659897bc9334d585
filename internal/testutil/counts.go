package testutil

import "sync"

// Counts is a metrics sink for tests (it satisfies idem.Metrics,
// ledger.Metrics and the executor's Metrics): it adds up every Count by
// metric name, ignoring the dimensions. The zero value is ready; safe for
// concurrent use.
type Counts struct {
	mu sync.Mutex
	n  map[string]float64
}

// Count adds n to name's total.
func (c *Counts) Count(name string, n float64, _ map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]float64{}
	}
	c.n[name] += n
}

// Get returns name's total so far (0 if it was never counted).
func (c *Counts) Get(name string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}
