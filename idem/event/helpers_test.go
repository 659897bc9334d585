package event_test

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/memstore"
)

// clock is an injected, manually advanced clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// env is a Guard on an in-memory store with a manual clock and a captured
// log.
type env struct {
	store *memstore.Store
	clock *clock
	logs  *syncBuffer
	guard *idem.Guard
}

func newEnv(t *testing.T, mod func(*idem.Config)) *env {
	t.Helper()
	e := &env{store: memstore.New(), clock: &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}, logs: &syncBuffer{}}
	cfg := idem.Config{
		Store:  e.store,
		Tenant: idem.AuthorizerKey("tenantId"),
		Test:   idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: e.clock.Now}},
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Wait:   -1,
	}
	if mod != nil {
		mod(&cfg)
	}
	g, err := idem.New(cfg)
	if err != nil {
		t.Fatalf("idem.New: %v", err)
	}
	e.guard = g
	return e
}
