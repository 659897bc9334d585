package dynamotest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Emulator kinds.
const (
	Moto     = "moto"
	Dynalite = "dynalite"
	External = "external"
)

// DefaultRegion is the region of Emulator.Region unless AWS_REGION overrides
// it for an external endpoint.
const DefaultRegion = "us-east-1"

// Capabilities are the DynamoDB features an emulator implements. The values
// for moto and dynalite were verified empirically (see the package doc and
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
	// TTL: UpdateTimeToLive / DescribeTimeToLive are accepted. No emulator
	// deletes expired items.
	TTL bool
}

// staticCaps are the verified capabilities of the emulators started here.
var staticCaps = map[string]Capabilities{
	Moto:     {Transactions: true, ReturnValuesOnConditionCheckFailure: true, Streams: true, TTL: true},
	Dynalite: {},
}

// Emulator is a running DynamoDB-compatible server. Emulators are shared by
// all tests of a process; isolate tests with their own tables (CreateTable).
type Emulator struct {
	// Kind is "moto", "dynalite" or "external".
	Kind string
	// Endpoint is the base URL, e.g. http://127.0.0.1:40123.
	Endpoint string
	// Region is the region clients sign for (default us-east-1). moto keeps
	// one independent set of tables per region on a single server: use
	// InRegion to simulate two regions.
	Region string
	// Caps are the features the server implements.
	Caps Capabilities
}

// InRegion returns a copy of e whose clients and tables use region. On moto
// each region is an independent DynamoDB; dynalite ignores the region.
func (e *Emulator) InRegion(region string) *Emulator {
	c := *e
	c.Region = region
	return &c
}

// Kinds returns the emulator kinds tests should run against: {"external"}
// when DYNAMODB_ENDPOINT is set, else the kinds listed in DYNAMOTEST_KINDS
// (comma-separated), else {"moto", "dynalite"}.
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
	return []string{Moto, Dynalite}
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

// Start returns the process-wide emulator of kind, starting it on first use
// (concurrent callers wait for one start). If it cannot be started the test
// fails under CI=true and is skipped otherwise, with the reason.
func Start(t testing.TB, kind string) *Emulator {
	t.Helper()
	e, err := get(kind)
	if err != nil {
		msg := fmt.Sprintf("dynamotest: %s emulator unavailable: %v", kind, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return e
}

// Main runs the tests of m, stops every emulator this process started, and
// exits with the tests' status. Use it as TestMain:
//
//	func TestMain(m *testing.M) { dynamotest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	StopAll()
	os.Exit(code)
}

// StopAll stops every emulator this process started (SIGTERM to its process
// group, SIGKILL after two seconds). Later Start calls start new ones.
func StopAll() {
	mu.Lock()
	defer mu.Unlock()
	for k, s := range servers {
		s.proxy.close()
		if s.proc != nil {
			s.proc.stop()
		}
		delete(servers, k)
	}
}

type server struct {
	once  sync.Once
	emu   *Emulator
	proc  *process
	proxy *serializer
	err   error
}

var (
	mu      sync.Mutex
	servers = map[string]*server{}
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
		s.emu, s.proc, s.err = launch(kind)
		if s.err == nil && kind == Moto {
			// See serializer: moto's conditional writes are not atomic.
			var ep string
			if s.proxy, ep, s.err = startSerializer(s.emu.Endpoint); s.err != nil {
				s.proc.stop()
				s.emu = nil
				return
			}
			s.emu.Endpoint = ep
		}
	})
	return s.emu, s.err
}

func launch(kind string) (*Emulator, *process, error) {
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
		if err := waitReady(ctx, e, nil); err != nil {
			return nil, nil, err
		}
		caps, err := Probe(ctx, e)
		if err != nil {
			return nil, nil, fmt.Errorf("probing %s: %w", ep, err)
		}
		e.Caps = caps
		return e, nil, nil
	case Moto, Dynalite:
	default:
		return nil, nil, fmt.Errorf("unknown emulator kind %q (want moto, dynalite or external)", kind)
	}
	var lastErr error
	// A free port can be taken by another process between our probe and the
	// emulator's bind; retry on a new port.
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, nil, err
		}
		name, args, err := command(kind, port)
		if err != nil {
			return nil, nil, err
		}
		p, err := startProcess(name, args)
		if err != nil {
			return nil, nil, err
		}
		e := &Emulator{
			Kind:     kind,
			Endpoint: "http://127.0.0.1:" + strconv.Itoa(port),
			Region:   DefaultRegion,
			Caps:     staticCaps[kind],
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		err = waitReady(ctx, e, p.done)
		cancel()
		if err == nil {
			return e, p, nil
		}
		p.stop()
		lastErr = fmt.Errorf("%s did not become ready: %v; output: %s", kind, err, p.out.String())
	}
	return nil, nil, lastErr
}

// command returns the emulator command line for kind listening on port.
func command(kind string, port int) (string, []string, error) {
	p := strconv.Itoa(port)
	switch kind {
	case Moto:
		bin, err := exec.LookPath("moto_server")
		if err != nil {
			return "", nil, fmt.Errorf("moto_server not on PATH (pip install 'moto[server]'): %w", err)
		}
		return bin, []string{"-H", "127.0.0.1", "-p", p}, nil
	default: // Dynalite
		bin, err := dynaliteBin()
		if err != nil {
			return "", nil, err
		}
		return bin, []string{"--host", "127.0.0.1", "--port", p,
			"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"}, nil
	}
}

// RepoRoot is the module root (the directory holding go.mod).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// dynaliteBin returns tools/node_modules/.bin/dynalite, running
// `npm ci --prefix tools` first if it is missing. Several test binaries may
// race here; a file lock makes one of them install and the others wait.
func dynaliteBin() (string, error) {
	tools := filepath.Join(RepoRoot(), "tools")
	bin := filepath.Join(tools, "node_modules", ".bin", "dynalite")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	unlock, err := lockFile(filepath.Join(os.TempDir(), "idemkit-tools-npm-ci.lock"))
	if err != nil {
		return "", fmt.Errorf("locking for npm ci: %w", err)
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // installed by another process while we waited
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("dynalite is not installed and npm is not on PATH (run `make tools`): %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--prefix", tools, "--no-audit", "--no-fund")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci --prefix tools: %v: %s", err, out)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("npm ci --prefix tools did not install %s", bin)
	}
	return bin, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls ListTables until it succeeds, ctx ends or exited closes.
func waitReady(ctx context.Context, e *Emulator, exited <-chan struct{}) error {
	c := e.Client(func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.ListTables(cctx, &dynamodb.ListTablesInput{})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-exited:
			return errors.New("process exited")
		case <-time.After(50 * time.Millisecond):
		}
	}
}
