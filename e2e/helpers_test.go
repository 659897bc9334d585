// Package e2e holds the end-to-end tests of the built artefacts: the api
// function's bootstrap binary under the AWS Lambda Runtime Interface
// Emulator, and `idemkit dev` driven over HTTP. Where a prerequisite cannot
// be had (no moto_server, no RIE and no way to install it), a test skips,
// and under CI=true it fails.
package e2e

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/shared"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// unavailable ends a test whose prerequisite is missing: fail under CI=true,
// skip elsewhere.
func unavailable(t testing.TB, format string, a ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, a...)
	}
	t.Skipf(format, a...)
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

var buildMu sync.Mutex

// build compiles pkg (relative to the module root) into dir/name for
// goos/goarch with the release flags (-trimpath -ldflags='-s -w', no cgo).
func build(t testing.TB, dir, name, pkg, goos, goarch string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./"+pkg)
	cmd.Dir = shared.ModuleRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

func buildHost(t testing.TB, dir, name, pkg string) string {
	return build(t, dir, name, pkg, runtime.GOOS, runtime.GOARCH)
}

// rieBinary finds aws-lambda-rie: bin/ of the repository (make installs it
// there), then PATH, else installs it into bin/ with
// `go install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@latest`.
func rieBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(shared.ModuleRoot(), "bin")
	local := filepath.Join(bin, "aws-lambda-rie")
	if _, err := os.Stat(local); err == nil {
		return local
	}
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	cmd := exec.Command("go", "install", "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@latest")
	cmd.Env = append(os.Environ(), "GOBIN="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		unavailable(t, "aws-lambda-rie is not installed and go install failed: %v\n%s", err, out)
	}
	return local
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

// proc is a started process group.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *syncBuffer
}

func start(t testing.TB, env []string, name string, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{}), log: &syncBuffer{}}
	p.cmd = exec.Command(name, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(name), p.log.String())
		}
	})
	return p
}

// stop sends SIGTERM to the process group, then SIGKILL after 15 s.
func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
