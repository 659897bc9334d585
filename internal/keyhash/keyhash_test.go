package keyhash

import (
	"strings"
	"sync"
	"testing"
)

// TestFirstLogsFromManyGoroutinesAgree: the salt is drawn at the first Log,
// not at init; goroutines racing to be first all hash with the one salt, so
// a key hashes equal in every log line of the process (run with -race).
func TestFirstLogsFromManyGoroutinesAgree(t *testing.T) {
	const n = 16
	got := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got[i] = Log("idempotency-key-0123456789abcdef")
		}()
	}
	close(start)
	wg.Wait()
	for _, h := range got {
		if h != got[0] {
			t.Fatalf("the same key hashed %s and %s in one process", got[0], h)
		}
	}
	if !strings.HasPrefix(got[0], "kh:") || len(got[0]) != 3+12 || strings.Contains(got[0], "0123456789abcdef") {
		t.Fatalf("log form %q", got[0])
	}
	if Log("another-key") == got[0] {
		t.Fatal("two keys hashed equal")
	}
}
