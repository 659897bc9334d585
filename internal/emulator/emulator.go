// Package emulator starts a local DynamoDB emulator for `idemkit dev`:
// moto_server (DynamoDB and DynamoDB Streams on one endpoint) on a free
// loopback port, in its own process group, reached through a serializing
// proxy because moto's conditional writes are not atomic under concurrency
// (see internal/dynamotest). Tests use internal/dynamotest instead; this
// package is the non-test starter.
package emulator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Region is the region the emulator is addressed with.
const Region = "us-east-1"

// Credentials are the static credentials used with the emulator.
var Credentials = credentials.NewStaticCredentialsProvider("idemkit", "idemkit", "")

// Moto is a running moto_server. Stop it with Stop.
type Moto struct {
	// Endpoint is the (serialized) endpoint URL for clients.
	Endpoint string
	cmd      *exec.Cmd
	done     chan struct{}
	out      *lockedBuffer
	proxy    *http.Server
	once     sync.Once
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 {
		l.b.Reset()
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartMoto starts moto_server on a free loopback port and waits (bounded
// by ctx) until it answers ListTables.
func StartMoto(ctx context.Context) (*Moto, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, fmt.Errorf("moto_server is not on PATH (pip install 'moto[server]'), or pass --dynamodb-endpoint: %w", err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		m := &Moto{done: make(chan struct{}), out: &lockedBuffer{}}
		m.cmd = exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
		m.cmd.Stdout, m.cmd.Stderr = m.out, m.out
		m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		m.cmd.WaitDelay = 2 * time.Second
		if err := m.cmd.Start(); err != nil {
			return nil, err
		}
		go func() { _ = m.cmd.Wait(); close(m.done) }()
		direct := "http://127.0.0.1:" + strconv.Itoa(port)
		if err = waitReady(ctx, direct, m.done); err == nil {
			if m.Endpoint, m.proxy, err = serialize(direct); err == nil {
				return m, nil
			}
		}
		m.Stop()
		lastErr = fmt.Errorf("moto_server did not become ready: %v; output: %s", err, m.out.String())
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// PID is the emulator's process id (it leads its own process group).
func (m *Moto) PID() int { return m.cmd.Process.Pid }

// Stop stops the proxy and the emulator's process group (SIGTERM, then
// SIGKILL after 2 s).
func (m *Moto) Stop() {
	m.once.Do(func() {
		if m.proxy != nil {
			_ = m.proxy.Close()
		}
		select {
		case <-m.done:
			return
		default:
		}
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(2 * time.Second):
			_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
			<-m.done
		}
	})
}

// Client returns a DynamoDB client for endpoint with static credentials.
func Client(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{Region: Region, BaseEndpoint: aws.String(endpoint), Credentials: Credentials}, optFns...)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitReady(ctx context.Context, endpoint string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	c := Client(endpoint, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.ListTables(cctx, &dynamodb.ListTablesInput{})
		ccancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-exited:
			return errors.New("process exited")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// serialize starts a loopback reverse proxy forwarding one request at a time.
func serialize(target string) (string, *http.Server, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	p := httputil.NewSingleHostReverseProxy(u)
	p.Transport = &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
	var mu sync.Mutex
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		p.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), srv, nil
}
