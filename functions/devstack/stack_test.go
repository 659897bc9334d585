package devstack_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/devstack"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/testutil"
)

// startStack starts the stack in-process on the shared moto emulator, on a
// free port, with one seeded key for tenant acme, and stops it when the
// test ends.
func startStack(t *testing.T, o devstack.Options) *devstack.Stack {
	t.Helper()
	e := dynamotest.Start(t, dynamotest.Moto)
	o.Endpoint = e.Endpoint
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.TablePrefix == "" {
		o.TablePrefix = fmt.Sprintf("stack%d-", time.Now().UnixNano())
	}
	// Start's ctx bounds the stack's life: the test's.
	s, err := devstack.Start(t.Context(), o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// TestStartRejectsBadOptionsBeforeStartingAnything: every problem of the
// Options is reported at once, as ErrConfig (a bad setting also as
// settings.ErrConfig), and nothing is started: the address stays free.
func TestStartRejectsBadOptionsBeforeStartingAnything(t *testing.T) {
	addr := testutil.FreeAddr(t)
	_, err := devstack.Start(context.Background(), devstack.Options{
		Addr: addr, Engine: emulator.Moto, Endpoint: "http://127.0.0.1:9",
		IdempotencyWait: -time.Second, AuthorizerTTL: -time.Second, RequestTimeout: -time.Second,
		APIKeys:  []string{"no-tenant"},
		Settings: map[string]string{"IDEMPOTENCY_POLICY": "strict"},
	})
	if !errors.Is(err, devstack.ErrConfig) || !errors.Is(err, settings.ErrConfig) {
		t.Fatalf("Start: %v, want ErrConfig and settings.ErrConfig", err)
	}
	for _, want := range []string{"exclude each other", "IdempotencyWait", "AuthorizerTTL", "RequestTimeout", "KEY=TENANT", "IDEMPOTENCY_POLICY"} {
		if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(want)) {
			t.Errorf("Start's error %q does not name %s", err, want)
		}
	}
	if _, err := devstack.Start(context.Background(), devstack.Options{Engine: "dynamo-local"}); !errors.Is(err, devstack.ErrConfig) || !errors.Is(err, emulator.ErrUnknownEngine) {
		t.Fatalf("unknown engine: %v, want ErrConfig and emulator.ErrUnknownEngine", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("after a refused Start, %s is taken: %v", addr, err)
	}
	ln.Close()
}

// TestStartServesInProcessAndStopEndsIt: a stack started in-process serves
// the run API with its seeded key (a same-key retry is a replay), reports
// its URL, endpoint, keys and tables, and Stop ends it: the port refuses
// connections, Done is closed, and a second Stop is harmless.
func TestStartServesInProcessAndStopEndsIt(t *testing.T) {
	key := "idk_stack_test_0123456789"
	s := startStack(t, devstack.Options{APIKeys: []string{key + "=acme"}})
	if got := s.APIKeys(); len(got) != 1 || got[0] != key+"=acme" {
		t.Fatalf("APIKeys %v", got)
	}
	if s.Endpoint() == "" || s.Tables()["RunsTable"] == "" {
		t.Fatalf("Endpoint %q, Tables %v", s.Endpoint(), s.Tables())
	}
	post := func() (int, string, string) {
		resp, m := testutil.DoJSON(t, "POST", s.URL()+"/runs", `{"workflowId":"conformance-noop"}`,
			"Authorization", testutil.Bearer(key), "Idempotency-Key", "stack-test-key-0123456789")
		id, _ := m["runId"].(string)
		return resp.StatusCode, id, resp.Header.Get("OpenWOP-Idempotent-Replay")
	}
	c1, id1, _ := post()
	c2, id2, replay := post()
	if c1 != 201 || c2 != 201 || id1 == "" || id1 != id2 || replay != "true" {
		t.Fatalf("createRun twice: %d %s, %d %s replay %q", c1, id1, c2, id2, replay)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if c, err := net.Dial("tcp", s.URL()[len("http://"):]); err == nil {
		c.Close()
		t.Fatal("the API still accepts connections after Stop")
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}
