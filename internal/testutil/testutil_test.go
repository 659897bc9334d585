package testutil_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/emulator/proc"
	"github.com/idemkit/idemkit/internal/testutil"
)

func TestFreeAddr(t *testing.T) {
	addr := testutil.FreeAddr(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	l.Close()
}

func TestWaitHTTP(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := testutil.WaitHTTP(ctx, srv.URL, nil); err != nil || calls.Load() != 3 {
		t.Fatalf("err %v after %d calls", err, calls.Load())
	}

	exited := make(chan struct{})
	close(exited)
	if err := testutil.WaitHTTP(ctx, "http://"+testutil.FreeAddr(t), exited); !errors.Is(err, proc.ErrExited) {
		t.Fatalf("exited: %v", err)
	}
}

func TestStart(t *testing.T) {
	p := testutil.Start(t, exec.Command("sh", "-c", `echo hello; exec sleep 60`), time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := proc.Poll(ctx, 10*time.Millisecond, p.Done(), func(context.Context) error {
		if !strings.Contains(p.Log.String(), "hello") {
			return errors.New("no output yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err, p.Log.String())
	}
	p.Stop()
	if !p.Exited() {
		t.Fatal("Stop returned before the process exited")
	}
}

// Shown output matches the real output line by line, in order, "…" standing
// for any text; a drifted line does not match.
func TestMatchShown(t *testing.T) {
	got := "a 1\nnoise\nPASS x: two credentials\nend 3 s\n"
	if err := testutil.MatchShown("a …\nPASS x: two credentials\nend … s\n", got); err != nil {
		t.Fatal(err)
	}
	if err := testutil.MatchShown("PASS x: two tenants\n", got); err == nil {
		t.Fatal("a drifted line matched")
	}
	if err := testutil.MatchShown("end 3 s\na 1\n", got); err == nil {
		t.Fatal("lines out of order matched")
	}
}

func TestCountsAddsUpByName(t *testing.T) {
	var c testutil.Counts
	if got := c.Get("a"); got != 0 {
		t.Fatalf("an empty Counts reads %v", got)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Count("a", 1, map[string]string{"d": "x"})
			c.Count("b", 0.5, nil)
		}()
	}
	wg.Wait()
	if a, b := c.Get("a"), c.Get("b"); a != 8 || b != 4 {
		t.Fatalf("a = %v, b = %v; want 8 and 4", a, b)
	}
}
