package testutil

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
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
// moment ago, so two servers started side by side (the RIE and its
// runtime API) never draw the same port, as two calls to FreeAddr can.
// The ports come from below the kernel's ephemeral range (proc.FreePort),
// so a server that takes a while to listen (idemkit dev starting its
// engine) does not lose its port meanwhile to a listener on port 0.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	addrs := make([]string, 0, n)
	seen := map[int]bool{}
	for len(addrs) < n {
		port, err := proc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			continue
		}
		seen[port] = true
		addrs = append(addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
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
