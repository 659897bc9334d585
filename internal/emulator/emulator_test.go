package emulator

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/testutil"
)

// countingBackend is a backend for the serializing proxy that records the
// most requests it had in flight at once and how many it served; each
// request calls arrive (when not nil), then takes hold before its 204.
type countingBackend struct {
	*httptest.Server
	inFlight, most, served atomic.Int32
}

func newCountingBackend(t *testing.T, hold time.Duration, arrive func()) *countingBackend {
	t.Helper()
	b := &countingBackend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := b.inFlight.Add(1)
		for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
		}
		if arrive != nil {
			arrive()
		}
		time.Sleep(hold)
		b.inFlight.Add(-1)
		b.served.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(b.Close)
	return b
}

// serialized starts the serializing proxy in front of backend and returns
// its URL; the proxy is closed when the test ends.
func serialized(t *testing.T, backend string) string {
	t.Helper()
	s, url, err := startSerializer(backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return url
}

// TestSerializerForwardsOneAtATime: however many requests arrive at once,
// the backend behind the proxy never sees two in flight (the fix for moto's
// non-atomic conditional writes), and every request is answered.
func TestSerializerForwardsOneAtATime(t *testing.T) {
	b := newCountingBackend(t, 2*time.Millisecond, nil) // widen the window an overlap would need
	url := serialized(t, b.URL)
	var wg sync.WaitGroup
	for i := 0; i < 32; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(url+"/", "application/x-amz-json-1.0", strings.NewReader("{}"))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				t.Errorf("status %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	if b.served.Load() != 32 || b.most.Load() != 1 {
		t.Fatalf("served %d, at most %d in flight at the backend; want 32 and 1", b.served.Load(), b.most.Load())
	}
}

// TestSerializerHoldsACancelledRequest: a client that hangs up while its
// request is at the backend does not end that request there (moto goes on
// with a write whose client left), so the proxy must not forward the next
// request before the backend answered the first: the backend never sees
// two in flight, however its clients cancel.
func TestSerializerHoldsACancelledRequest(t *testing.T) {
	arrived := make(chan struct{}, 1)
	b := newCountingBackend(t, 200*time.Millisecond, func() { // a write that goes on after its client left
		select {
		case arrived <- struct{}{}:
		default:
		}
	})
	url := serialized(t, b.URL)
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/", strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		first <- err
	}()
	<-arrived
	cancel() // the first client hangs up while the backend works on its request
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first request: %v; want it cancelled", err)
	}
	resp, err := http.Post(url+"/", "application/x-amz-json-1.0", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || b.most.Load() != 1 {
		t.Fatalf("second request %d; at most %d in flight at the backend, want 1", resp.StatusCode, b.most.Load())
	}
}

// TestStartUnknownKind: a name that is not in the engine table is an error
// matching ErrUnknownEngine that lists the known names; nothing starts.
func TestStartUnknownKind(t *testing.T) {
	_, err := Start(context.Background(), "cassandra", Options{})
	if !errors.Is(err, ErrUnknownEngine) || !strings.Contains(err.Error(), KindList(", ", " or ")) {
		t.Fatalf("got %v", err)
	}
	if _, err := Lookup(""); !errors.Is(err, ErrUnknownEngine) {
		t.Fatalf("Lookup(\"\"): %v", err)
	}
}

// TestNPMEnginesWithoutToolsDirInstallIntoTheUserCache: without ToolsDir
// the npm-installed engines come from the user's cache directory; with no
// npm to install them the error says so and no cache entry is left.
func TestNPMEnginesWithoutToolsDirInstallIntoTheUserCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("PATH", t.TempDir()) // no npm
	_, err := Start(context.Background(), Dynalite, Options{})
	if err == nil || !strings.Contains(err.Error(), "npm is not on PATH") {
		t.Fatalf("got %v", err)
	}
	if entries, _ := filepath.Glob(filepath.Join(cache, "idemkit", "engines", PinsHash()+"*")); len(entries) != 1 || !strings.HasSuffix(entries[0], ".lock") {
		t.Fatalf("cache after a failed install: %v, want the lock file only", entries)
	}
}

// TestStartDevWithoutProgram: `idemkit dev`'s error names the missing
// program and the flags that avoid it, for moto and for DynamoDB Local
// without java; and without java the default engine is moto.
func TestStartDevWithoutProgram(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv(EnvMotoServer, "") // make test names one
	_, err := StartDev(context.Background(), Moto, Options{})
	if err == nil || !strings.Contains(err.Error(), "moto_server is not on PATH") || !strings.Contains(err.Error(), "--dynamodb-endpoint") {
		t.Fatalf("moto: got %v", err)
	}
	_, err = StartDev(context.Background(), DynamoDBLocal, Options{ToolsDir: filepath.Join(shared.ModuleRoot(), "tools")})
	if !errors.Is(err, ErrNoJava) || !strings.Contains(err.Error(), "--emulator") {
		t.Fatalf("dynamodb-local: got %v", err)
	}
	if k := DefaultDevKind(); k != Moto {
		t.Fatalf("default without java: %s, want moto", k)
	}
}

// TestStartAndStop starts each emulator, uses it through Endpoint (the
// proxy for moto) and stops it: Stop returns once the process has exited,
// and is idempotent.
func TestStartAndStop(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			s, err := Start(ctx, kind, Options{ToolsDir: filepath.Join(shared.ModuleRoot(), "tools")})
			if err != nil {
				testutil.Unavailable(t, "%s emulator unavailable: %v", kind, err)
			}
			defer s.Stop()
			if s.Kind != kind || s.PID() <= 0 || !strings.HasPrefix(s.Endpoint, "http://127.0.0.1:") {
				t.Fatalf("%+v pid %d", s, s.PID())
			}
			if (s.proxy != nil) != s.Engine.Caps.Serialize {
				t.Fatalf("proxy %v for %s: exactly the engines whose Caps.Serialize is set are reached through the serializer", s.proxy, kind)
			}
			if _, err := Client(s.Endpoint).ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
				t.Fatal(err)
			}
			// HasStreams agrees with the engine table's capability.
			if HasStreams(ctx, s.Backend) != s.Engine.Caps.Streams {
				t.Fatalf("HasStreams(%s) = %v", kind, !s.Engine.Caps.Streams)
			}
			// IsMoto tells moto from the others, behind the proxy or not.
			if IsMoto(ctx, s.Backend) != (kind == Moto) || IsMoto(ctx, s.Endpoint) != (kind == Moto) {
				t.Fatalf("IsMoto(%s) = %v", kind, !(kind == Moto))
			}
			s.Stop()
			if !s.proc.Exited() {
				t.Fatal("Stop returned before the emulator exited")
			}
			s.Stop()
			if _, err := Client(s.Endpoint, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }).ListTables(ctx, &dynamodb.ListTablesInput{}); err == nil {
				t.Fatal("endpoint still answers after Stop")
			}
		})
	}
}
