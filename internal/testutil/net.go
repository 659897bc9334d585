package testutil

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/emulator/proc"
)

// FreeAddr returns a 127.0.0.1:PORT address that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return FreeAddrs(t, 1)[0]
}

// FreeAddrs returns n distinct 127.0.0.1:PORT addresses that were free a
// moment ago: every port is held until all n are chosen, so two servers
// started side by side (the RIE and its runtime API) never draw the same
// port, as two calls to FreeAddr can.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

// WaitHTTP polls GET url every 50 ms until it answers 200 (nil), ctx ends,
// or exited closes (proc.ErrExited; nil never closes).
func WaitHTTP(ctx context.Context, url string, exited <-chan struct{}) error {
	return proc.Poll(ctx, 50*time.Millisecond, exited, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	})
}
