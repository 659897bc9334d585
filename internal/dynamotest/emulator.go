package dynamotest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/testutil"
)

// Emulator kinds.
const (
	Moto          = emulator.Moto
	Dynalite      = emulator.Dynalite
	DynamoDBLocal = emulator.DynamoDBLocal
	External      = "external"
)

// DefaultRegion is the region of Emulator.Region unless AWS_REGION overrides
// it for an external endpoint.
const DefaultRegion = emulator.Region

// Capabilities are the DynamoDB features an emulator implements. The values
// for the started emulators were verified empirically (see the package doc and
// TestCapabilities); for an external endpoint they are probed at start-up.
type Capabilities struct {
	// Transactions: TransactWriteItems / TransactGetItems.
	Transactions bool
	// ReturnValuesOnConditionCheckFailure: a failed conditional write with
	// ReturnValuesOnConditionCheckFailure=ALL_OLD returns the existing item
	// in the ConditionalCheckFailedException.
	ReturnValuesOnConditionCheckFailure bool
	// Streams: tables created with a StreamSpecification have a stream that
	// can be read through the DynamoDB Streams API.
	Streams bool
	// TTL: UpdateTimeToLive / DescribeTimeToLive are accepted. Only
	// DynamoDB Local also deletes expired items (see the package doc).
	TTL bool
}

// capsOf are the capabilities the engine table records for eng.
func capsOf(eng emulator.Engine) Capabilities {
	c := eng.Caps
	return Capabilities{Transactions: c.Transactions, ReturnValuesOnConditionCheckFailure: c.ReturnsOldOnConditionFailure, Streams: c.Streams, TTL: c.TTL}
}

// Emulator is a running DynamoDB-compatible server. Emulators are shared by
// all tests of a process; isolate tests with their own tables (CreateTable).
type Emulator struct {
	// Kind is "dynamodb-local", "moto", "dynalite" or "external".
	Kind string
	// Endpoint is the base URL, e.g. http://127.0.0.1:40123.
	Endpoint string
	// Region is the region clients sign for (default us-east-1). moto keeps
	// one independent set of tables per region on a single server: use
	// InRegion to simulate two regions.
	Region string
	// Caps are the features the server implements: the engine table's
	// (internal/emulator) for a started engine, probed for an external one.
	Caps Capabilities
	// DeletesExpired is the engine table's Caps.DeletesExpired (true for
	// DynamoDB Local, which, like DynamoDB, deletes items whose TTL attribute lies in the past. The suites drive
	// fake clocks set days or months before the wall clock, so their items
	// would vanish under them: CreateTable leaves TTL disabled there (the
	// stores never rely on the deletion; they compare expiry on read).
	DeletesExpired bool
}

// InRegion returns a copy of e whose clients and tables use region. On moto
// each region is an independent DynamoDB; dynalite and DynamoDB Local
// (started with -sharedDb, so that any credentials reach the same tables,
// as with `idemkit dev`) ignore the region.
func (e *Emulator) InRegion(region string) *Emulator {
	c := *e
	c.Region = region
	return &c
}

// Kinds returns the emulator kinds tests should run against: {"external"}
// when DYNAMODB_ENDPOINT is set, else the kinds listed in DYNAMOTEST_KINDS
// (comma-separated), else every engine of internal/emulator's engine table
// (emulator.Kinds: dynamodb-local, moto, dynalite).
func Kinds() []string {
	if os.Getenv("DYNAMODB_ENDPOINT") != "" {
		return []string{External}
	}
	if v := os.Getenv("DYNAMOTEST_KINDS"); v != "" {
		var ks []string
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				ks = append(ks, k)
			}
		}
		return ks
	}
	return append([]string(nil), emulator.Kinds...)
}

// ForEach runs fn in one subtest per kind of Kinds(), named after the kind,
// with the started emulator.
func ForEach(t *testing.T, fn func(t *testing.T, e *Emulator)) {
	t.Helper()
	for _, k := range Kinds() {
		t.Run(k, func(t *testing.T) {
			fn(t, Start(t, k))
		})
	}
}

// ForEachConcurrently is ForEach with the kinds' subtests run at the same
// time, each in its own goroutine, and returns when all have ended. It is
// for tests whose time is spent waiting (a store call held until its
// deadline, a run's timed node), not computing: their waits overlap, where
// ForEach would add them up. It takes no slot of go test's -parallel, so
// the kinds overlap whatever that is. fn must share nothing mutable between
// kinds (each builds its own stack, tables and buffers), and must not call
// t.Setenv or t.Parallel. What each subtest checks is what it checks under
// ForEach.
func ForEachConcurrently(t *testing.T, fn func(t *testing.T, e *Emulator)) {
	t.Helper()
	ForKindsConcurrently(t, Kinds(), func(t *testing.T, kind string) { fn(t, Start(t, kind)) })
}

// ForKindsConcurrently runs fn in one subtest per kind of kinds, named after
// the kind, all at the same time (as ForEachConcurrently does), for tests
// that choose their kinds themselves.
func ForKindsConcurrently(t *testing.T, kinds []string, fn func(t *testing.T, kind string)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, k := range kinds {
		wg.Go(func() {
			t.Run(k, func(t *testing.T) { fn(t, k) })
		})
	}
	wg.Wait()
}

// ForEachWith is ForEach restricted to the emulators whose capabilities
// satisfy need (e.g. transactions): a kind without them is not run at all,
// rather than run and skipped; what such a store does instead (a typed
// refusal, a documented fallback) is tested where it matters. At least one
// kind must qualify, or the test fails.
func ForEachWith(t *testing.T, need func(Capabilities) bool, fn func(t *testing.T, e *Emulator)) {
	t.Helper()
	ran := 0
	for _, k := range Kinds() {
		e := Start(t, k)
		if !need(e.Caps) {
			t.Logf("%s: lacks the capability this test needs; not run there", k)
			continue
		}
		ran++
		t.Run(k, func(t *testing.T) { fn(t, e) })
	}
	if ran == 0 {
		t.Fatalf("no emulator among %v has the capability this test needs", Kinds())
	}
}

// ForEachWithConcurrently is ForEachWith with the qualifying kinds'
// subtests run at the same time, as ForEachConcurrently runs them, for
// the same kind of test (its time spent waiting) under the same rules.
func ForEachWithConcurrently(t *testing.T, need func(Capabilities) bool, fn func(t *testing.T, e *Emulator)) {
	t.Helper()
	var kinds []string
	for _, k := range Kinds() {
		if e := Start(t, k); !need(e.Caps) {
			t.Logf("%s: lacks the capability this test needs; not run there", k)
			continue
		}
		kinds = append(kinds, k)
	}
	if len(kinds) == 0 {
		t.Fatalf("no emulator among %v has the capability this test needs", Kinds())
	}
	ForKindsConcurrently(t, kinds, func(t *testing.T, kind string) { fn(t, Start(t, kind)) })
}

// Transactions is a ForEachWith need: TransactWriteItems is supported.
func Transactions(c Capabilities) bool { return c.Transactions }

// Streams is a ForEachWith need: tables have DynamoDB Streams.
func Streams(c Capabilities) bool { return c.Streams }

// Start returns the process-wide emulator of kind, starting it on first use
// (concurrent callers wait for one start). If it cannot be started the test
// fails under CI=true and is skipped otherwise, with the reason. A kind that
// is not in the engine table (a typo in DYNAMOTEST_KINDS) always fails the
// test: skipping would pass a suite that ran nothing.
func Start(t testing.TB, kind string) *Emulator {
	t.Helper()
	e, err := get(kind)
	if errors.Is(err, emulator.ErrUnknownEngine) {
		t.Fatalf("dynamotest: %v", err)
	}
	if err != nil {
		testutil.Unavailable(t, "dynamotest: %s emulator unavailable: %v", kind, err)
	}
	return e
}

// Main runs the tests of m, stops every emulator this process started,
// removes the binaries testutil.Build kept, and exits with the tests'
// status. Use it as TestMain:
//
//	func TestMain(m *testing.M) { dynamotest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	StopAll()
	testutil.RemoveBuilds()
	os.Exit(code)
}

// StopAll stops every emulator this process started (SIGTERM to its process
// group, SIGKILL after two seconds). Later Start calls start new ones.
func StopAll() {
	mu.Lock()
	defer mu.Unlock()
	for k, s := range servers {
		if s.srv != nil {
			stopped[s.srv] = true
			s.srv.Stop()
		}
		delete(servers, k)
	}
}

type server struct {
	once sync.Once
	emu  *Emulator
	srv  *emulator.Server // nil for External
	err  error
}

var (
	mu      sync.Mutex
	servers = map[string]*server{}
	// stopped holds the engines StopAll ended (their exit is expected).
	stopped = map[*emulator.Server]bool{}
)

func get(kind string) (*Emulator, error) {
	mu.Lock()
	s, ok := servers[kind]
	if !ok {
		s = &server{}
		servers[kind] = s
	}
	mu.Unlock()
	s.once.Do(func() {
		s.emu, s.srv, s.err = launch(kind)
		if s.srv != nil {
			go reportUnexpectedExit(kind, s.srv)
		}
	})
	return s.emu, s.err
}

// reportUnexpectedExit writes to stderr, once, that a shared engine's
// process ended while this process had not stopped it, with the last
// output the engine wrote: the tests that use it then fail with
// "connection refused", and this says why.
func reportUnexpectedExit(kind string, srv *emulator.Server) {
	<-srv.Done()
	mu.Lock()
	stopping := stopped[srv]
	mu.Unlock()
	if !stopping {
		fmt.Fprintf(os.Stderr, "dynamotest: the shared %s engine (pid %d) exited while tests ran; its last output:\n%s\n", kind, srv.PID(), srv.Output())
	}
}

// launch starts kind through internal/emulator (moto is reached through its
// serializing proxy), or connects to DYNAMODB_ENDPOINT for External.
func launch(kind string) (*Emulator, *emulator.Server, error) {
	switch kind {
	case External:
		ep := os.Getenv("DYNAMODB_ENDPOINT")
		if ep == "" {
			return nil, nil, errors.New("DYNAMODB_ENDPOINT is not set")
		}
		region := os.Getenv("AWS_REGION")
		if region == "" {
			region = DefaultRegion
		}
		e := &Emulator{Kind: External, Endpoint: ep, Region: region}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := emulator.WaitReady(ctx, e.Client(), nil); err != nil {
			return nil, nil, err
		}
		caps, err := Probe(ctx, e)
		if err != nil {
			return nil, nil, fmt.Errorf("probing %s: %w", ep, err)
		}
		e.Caps = caps
		return e, nil, nil
	}
	eng, err := emulator.Lookup(kind)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (or %s with DYNAMODB_ENDPOINT)", err, External)
	}
	srv, err := emulator.Start(context.Background(), kind, emulator.Options{ToolsDir: filepath.Join(RepoRoot(), "tools"), SharedDB: true})
	if err != nil {
		return nil, nil, err
	}
	return &Emulator{Kind: kind, Endpoint: srv.Endpoint, Region: DefaultRegion, Caps: capsOf(eng), DeletesExpired: eng.Caps.DeletesExpired}, srv, nil
}

// RepoRoot is the module root (the directory holding go.mod).
func RepoRoot() string { return shared.ModuleRoot() }
