package devstack

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/runs"
)

// sseRig is dev's gateway over runs in memory behind a server whose read
// and write timeouts (300 ms) are shorter than the streams it holds, with
// a keep-alive every 40 ms and a re-read every 10 ms.
type sseRig struct {
	rs  *runs.MemRuns
	gw  *gateway
	srv *httptest.Server
}

func newSSERig(t *testing.T) *sseRig {
	t.Helper()
	x := &sseRig{rs: runs.NewMemRuns()}
	x.gw = memGateway(t, "http://dev", func(c *apifn.Config) { c.Runs = x.rs })
	x.gw.sseKeepAlive, x.gw.sseReread, x.gw.streams = 40*time.Millisecond, 10*time.Millisecond, newStreamCloser()
	x.srv = httptest.NewUnstartedServer(x.gw)
	x.srv.Config.ReadTimeout, x.srv.Config.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
	x.srv.Start()
	t.Cleanup(x.srv.Close)
	return x
}

// running stores a running run of tenant acme: event 0 run.started.
func (x *sseRig) running(t *testing.T) runs.Run {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	r := runs.NewRun("acme", "conformance-noop", json.RawMessage(`{}`), now)
	if err := x.rs.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	running, err := x.rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", now)
	if err != nil {
		t.Fatal(err)
	}
	return running
}

// liveSSERig is a rig holding one running run (newSSERig, running), the
// run, and the path of its event stream.
func liveSSERig(t *testing.T) (*sseRig, runs.Run, string) {
	t.Helper()
	x := newSSERig(t)
	r := x.running(t)
	return x, r, "/runs/" + runs.ProjectID(r.ID) + "/events"
}

// appendNode appends one node.started event to the running run r.
func (x *sseRig) appendNode(t *testing.T, id string) {
	t.Helper()
	r, err := x.rs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ev := runs.LogEvent{Type: runs.EventNodeStarted, NodeID: "a", At: time.Now().UTC(), Payload: json.RawMessage(`{"nodeId":"a","typeId":"x"}`)}
	if _, err := x.rs.AppendLog(context.Background(), id, r.Fence(), []runs.LogEvent{ev}, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
}

func (x *sseRig) end(t *testing.T, id string) {
	t.Helper()
	if _, err := x.rs.Transition(context.Background(), id, []runs.Status{runs.StatusRunning}, runs.StatusCompleted, "", time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
}

// sseLines is an open event stream: its lines, then a close when it ends.
type sseLines struct {
	resp  *http.Response
	lines chan string
}

func (x *sseRig) open(t *testing.T, ctx context.Context, method, path, lastID string) *sseLines {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, x.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer k1")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, resp.Header)
	}
	s := &sseLines{resp: resp, lines: make(chan string, 1000)}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	return s
}

// until reads lines until one has prefix want (returning the lines read,
// it included) or the stream ends or 2 s pass (failing the test).
func (s *sseLines) until(t *testing.T, want string) []string {
	t.Helper()
	var got []string
	deadline := time.After(30 * time.Second) // a hang guard, not a speed limit
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("the stream ended before %q: %q", want, got)
			}
			got = append(got, l)
			if strings.HasPrefix(l, want) {
				return got
			}
		case <-deadline:
			t.Fatalf("no %q within 30 s: %q", want, got)
		}
	}
}

// rest reads the lines left until the stream ends (failing the test when
// it does not end within 30 s).
func (s *sseLines) rest(t *testing.T) []string {
	t.Helper()
	var got []string
	deadline := time.After(30 * time.Second) // a hang guard, not a speed limit
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				return got
			}
			got = append(got, l)
		case <-deadline:
			t.Fatalf("the stream did not close: %q", got)
		}
	}
}

// frameIDs returns the id of each frame among lines, in order.
func frameIDs(lines []string) (ids []string) {
	for _, l := range lines {
		if id, ok := strings.CutPrefix(l, "id: "); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

func count(lines []string, prefix string) (n int) {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// TestDevHeldStreamFollowsALiveRun: under `idemkit dev` the event stream
// of a live run stays open (events.md §SSE frames): a keep-alive comment
// every period (here 40 ms; 15 s by default, at most 30 s), each event as
// it is recorded, never one twice, and the close right after the terminal
// event, past the server's read and write timeouts.
func TestDevHeldStreamFollowsALiveRun(t *testing.T) {
	x, r, path := liveSSERig(t)
	s := x.open(t, context.Background(), "GET", path+"?streamMode=debug", "")
	head := s.until(t, "id: 0")
	if head[0] != strings.TrimSuffix(heldComment, "\n") || head[1] != "retry: 2000" {
		t.Fatalf("the stream opens %q", head)
	}
	got := s.until(t, "data: ") // run.started's
	// Keep-alive comments follow one another while nothing is recorded
	// (until fails the test when none comes), and the stream outlives the
	// server's 300 ms write timeout.
	got = append(got, s.until(t, ": keep-alive")...)
	got = append(got, s.until(t, ": keep-alive")...)
	time.Sleep(400 * time.Millisecond)
	x.appendNode(t, r.ID)
	got = append(got, s.until(t, "event: node.started")...)
	x.end(t, r.ID)
	got = append(got, s.until(t, "event: run.completed")...)
	got = append(got, s.rest(t)...)
	if count(got, "id: ") != 2 || count(got, "id: 1") != 1 || count(got, "id: 2") != 1 || count(got, "event: node.started") != 1 || count(got, "event: run.completed") != 1 {
		t.Fatalf("after run.started: %q; want node.started (1) and run.completed (2) once each, then the close", got)
	}
	if tail := got[len(got)-3:]; !strings.HasPrefix(tail[0], "event: run.completed") || !strings.HasPrefix(tail[1], "data: ") || tail[2] != "" {
		t.Fatalf("the stream did not end with the terminal event: %q", tail)
	}
}

// TestDevHeldStreamResumes: Last-Event-ID at the end of a live run's log
// holds the stream with no frame until a later event (§Resuming); in
// values mode the snapshot comes first and again once the log grows; a
// terminal run's stream, and a HEAD, are answered and closed as before.
func TestDevHeldStreamResumes(t *testing.T) {
	x, r, path := liveSSERig(t)
	s := x.open(t, context.Background(), "GET", path, "0")
	v := x.open(t, context.Background(), "GET", path+"?streamMode=values", "0")
	wide := x.open(t, context.Background(), "GET", path+"?streamMode=debug", "99999999999999999999")
	got := s.until(t, ": keep-alive")
	got = append(got, s.until(t, ": keep-alive")...)
	if count(got, "id: ") != 0 {
		t.Fatalf("a frame at the end of the log: %q", got)
	}
	if vs := v.until(t, "event: state.snapshot"); count(vs, "id: 0") != 1 {
		t.Fatalf("values: %q", vs)
	}
	held := wide.until(t, ": keep-alive")
	x.appendNode(t, r.ID) // not in updates, a new snapshot in values
	x.end(t, r.ID)
	got = s.rest(t)
	if count(got, "id: ") != 1 || count(got, "id: 2") != 1 || count(got, "event: run.completed") != 1 {
		t.Fatalf("updates after 0: %q; want run.completed (2) only, then the close", got)
	}
	if ws := wide.rest(t); count(ws, "id: ") != 0 || count(held, "id: ") != 0 {
		t.Fatalf("Last-Event-ID past int64: %q; want a held stream closed without a frame", ws)
	}
	vs := v.rest(t)
	if ids := frameIDs(vs); len(ids) < 1 || len(ids) > 2 || ids[len(ids)-1] != "2" || len(ids) == 2 && ids[0] != "1" || count(vs, "event: state.snapshot") != len(ids) {
		t.Fatalf("values after the first snapshot: %q; want the snapshot at 2, after at most one at 1", vs)
	}

	// The run is terminal: its stream is the api's answer, closed.
	for _, c := range []struct{ method, lastID string }{{"GET", ""}, {"GET", "2"}, {"HEAD", ""}} {
		ls := x.open(t, context.Background(), c.method, path, c.lastID).rest(t)
		if count(ls, ": ") != 0 || count(ls, "retry:") != 0 {
			t.Fatalf("%s Last-Event-ID %q of a terminal run: %q", c.method, c.lastID, ls)
		}
	}
	// A HEAD of a live run is not held either.
	live := x.running(t)
	if ls := x.open(t, context.Background(), "HEAD", "/runs/"+runs.ProjectID(live.ID)+"/events", "").rest(t); len(ls) != 0 {
		t.Fatalf("HEAD: %q", ls)
	}
}

// TestDevHeldStreamEnds: a held stream ends when its client hangs up
// (the server's Close, which waits for its handlers, returns) and when
// the server stops (its clients reconnect with Last-Event-ID).
func TestDevHeldStreamEnds(t *testing.T) {
	x, _, path := liveSSERig(t)
	s := x.open(t, context.Background(), "GET", path, "")
	s.until(t, "id: 0")
	x.gw.streams.close()
	if rest := s.rest(t); count(rest, "id: ") != 0 {
		t.Fatalf("after the stop: %q", rest)
	}

	x, _, path = liveSSERig(t)
	ctx, cancel := context.WithCancel(context.Background())
	s = x.open(t, ctx, "GET", path, "")
	s.until(t, ": keep-alive")
	cancel()
	closed := make(chan struct{})
	go func() { x.srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second): // a hang guard, not a speed limit
		t.Fatal("the server's Close still waits for the stream of a client that hung up")
	}
}

// TestDevHeldStreamChecksItsKeyAgain: a held stream stands for the
// reconnects a client makes behind API Gateway, each of which passes the
// authorizer (its decision kept for the authorizer TTL): so each re-read
// asks the authorizer again, through the same decision cache. A key
// revoked while its stream is held stops the stream at the first re-read
// once its kept decision has expired (at once without a cache), with a
// comment saying why; a key still valid keeps reading, and while the
// decision is kept the re-reads read no key.
func TestDevHeldStreamChecksItsKeyAgain(t *testing.T) {
	for _, ttl := range []time.Duration{0, time.Minute} {
		x, r, path := liveSSERig(t)
		keys := &countingKeys{creds: map[string]apikeys.Credential{}}
		keys.set("k1", &apikeys.Credential{Tenant: "acme"})
		x.gw.auth.Keys = keys
		var now atomic.Int64
		now.Store(time.Unix(1_700_000_000, 0).UnixNano())
		if c := newAuthCache(ttl); c != nil {
			c.now = func() time.Time { return time.Unix(0, now.Load()) }
			x.gw.authCache = c
		}
		s := x.open(t, context.Background(), "GET", path+"?streamMode=debug", "")
		s.until(t, "id: 0")
		x.appendNode(t, r.ID)
		s.until(t, "event: node.started") // the key reads on
		keys.set("k1", nil)               // revoked
		if ttl > 0 {
			// The kept grant still serves the re-reads, with no key read.
			before := keys.readCount()
			x.appendNode(t, r.ID)
			s.until(t, "event: node.started")
			if n := keys.readCount() - before; n != 0 {
				t.Fatalf("ttl %v: %d key reads while the decision is kept", ttl, n)
			}
			now.Add(int64(ttl + time.Second))
		}
		rest := s.rest(t)
		if count(rest, "id: ") != 0 || count(rest, ": the API key is no longer accepted") != 1 {
			t.Fatalf("ttl %v: after the revocation: %q, want the close with its comment", ttl, rest)
		}
	}
	// A key store that fails closes the stream as a failed re-read does,
	// without saying the key was refused.
	x, _, path := liveSSERig(t)
	keys := &countingKeys{creds: map[string]apikeys.Credential{}}
	keys.set("k1", &apikeys.Credential{Tenant: "acme"})
	x.gw.auth.Keys = keys
	s := x.open(t, context.Background(), "GET", path, "")
	s.until(t, "id: 0")
	keys.mu.Lock()
	keys.fail = errors.New("the key store is down")
	keys.mu.Unlock()
	if rest := s.rest(t); count(rest, ": the API key") != 0 {
		t.Fatalf("after the key store failed: %q", rest)
	}
}
