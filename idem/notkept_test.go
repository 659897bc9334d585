package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	_ "github.com/idemkit/idemkit/idem/policy/erp" // registers the ERP policy
)

// tooLarge is a JSON body one byte over what a store keeps.
func tooLarge() []byte {
	b := bytes.Repeat([]byte("x"), idem.MaxResponseBytes+1)
	b[0], b[len(b)-1] = '"', '"'
	return b
}

// wantNotKept asserts that status, headers and body are the answer to a
// duplicate of a request whose response was not kept: 410
// idemkit.response_not_kept in the envelope, with the original status and
// the response's size in details, no Retry-After.
func wantNotKept(t *testing.T, status int, h http.Header, body []byte, origStatus, size int) {
	t.Helper()
	if status != http.StatusGone {
		t.Fatalf("duplicate: status %d, want 410; body %.200s", status, body)
	}
	if h.Get(idem.HeaderRetryAfter) != "" {
		t.Fatalf("duplicate: Retry-After %q on a final answer", h.Get(idem.HeaderRetryAfter))
	}
	var env struct {
		Error   string         `json:"error"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("duplicate: body is not the envelope: %v: %.200s", err, body)
	}
	if env.Error != idem.CodeResponseNotKept || env.Message == "" {
		t.Fatalf("duplicate: envelope %+v, want code %s", env, idem.CodeResponseNotKept)
	}
	if env.Details["status"] != float64(origStatus) || env.Details["size"] != float64(size) {
		t.Fatalf("duplicate: details %v, want status %d and size %d", env.Details, origStatus, size)
	}
}

// parallel runs n calls of fn at once (released together by a barrier)
// and waits for them.
func parallel(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			fn(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// TestResponseOverTheLimitRunsOnce: a handler answering a 2xx larger than
// MaxResponseBytes (the net/http middleware has no payload limit) runs
// once per key under every registered policy, sequentially and for
// parallel duplicates: the first caller gets the true response, every
// duplicate the final 410 idemkit.response_not_kept (never a re-run; a
// policy that does not wait answers a duplicate in flight while the first
// runs, and not kept once it completed), and a first execution still
// costs two store round trips, a duplicate one.
func TestResponseOverTheLimitRunsOnce(t *testing.T) {
	big := tooLarge()
	for _, name := range idem.PolicyNames() {
		t.Run(name, func(t *testing.T) {
			p, _ := idem.PolicyNamed(name)
			cs := &countingStore{Store: memstore.New()}
			g, err := idem.New(idem.Config{Store: cs, Tenant: idem.SingleTenant("acme"), Policy: p,
				Wait: 2 * time.Minute, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			var runs atomic.Int32
			h := g.Handle("POST /exports", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(201)
				_, _ = w.Write(big)
			}))

			key := "key-notkept-sequential-0123456789"
			first := post(h, "/exports", key, `{"a":1}`)
			if first.Code != 201 || !bytes.Equal(first.Body.Bytes(), big) {
				t.Fatalf("first: %d, %d bytes, want 201 and the true %d bytes", first.Code, first.Body.Len(), len(big))
			}
			if n := cs.n.Load(); n != 2 {
				t.Errorf("first execution: %d store round trips, want 2", n)
			}
			var dups []*httptest.ResponseRecorder
			for i := range 2 {
				cs.n.Store(0)
				dups = append(dups, post(h, "/exports", key, `{"a":1}`))
				if n := cs.n.Load(); n != 1 {
					t.Errorf("duplicate %d: %d store round trips, want 1", i+1, n)
				}
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("sequential: handler ran %d times for one key, want 1", n)
			}
			for _, r := range dups {
				wantNotKept(t, r.Code, r.Header(), r.Body.Bytes(), 201, len(big))
			}
			// The same key with another body is still a mismatch.
			if r := post(h, "/exports", key, `{"a":2}`); r.Code != 409 {
				t.Fatalf("other payload: %d, want 409", r.Code)
			}

			runs.Store(0)
			const n = 8
			out := make([]*httptest.ResponseRecorder, n)
			parallel(n, func(i int) { out[i] = post(h, "/exports", "key-notkept-parallel-0123456789", `{"a":1}`) })
			if got := runs.Load(); got != 1 {
				t.Fatalf("parallel: handler ran %d times for one key, want 1", got)
			}
			trueAnswers := 0
			for _, r := range out {
				switch {
				case r.Code == 201 && bytes.Equal(r.Body.Bytes(), big):
					trueAnswers++
				case r.Code == 409 && p.InFlight.NoWait:
					// A policy that answers a duplicate in flight at once
					// (the ERP policy) does so while the first runs.
				default:
					wantNotKept(t, r.Code, r.Header(), r.Body.Bytes(), 201, len(big))
				}
			}
			if trueAnswers != 1 {
				t.Fatalf("parallel: %d callers got the true response, want 1", trueAnswers)
			}
			r := post(h, "/exports", "key-notkept-parallel-0123456789", `{"a":1}`)
			wantNotKept(t, r.Code, r.Header(), r.Body.Bytes(), 201, len(big))
			if got := runs.Load(); got != 1 {
				t.Fatalf("after the parallel duplicates: handler ran %d times for one key, want 1", got)
			}
		})
	}
}

// TestOnceValueOverTheLimitRunsOnce: a Guard.Once work returning a value
// larger than MaxResponseBytes runs once per key, sequentially and for
// parallel duplicates: its first caller gets the value (ran true), every
// other call ErrNotKept (ran false) without running it.
func TestOnceValueOverTheLimitRunsOnce(t *testing.T) {
	big := tooLarge()
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("acme"), Wait: 2 * time.Minute, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	work := func(key string) idem.Work {
		return idem.Work{Operation: "export", Key: key, Payload: []byte("p"), Run: func(context.Context) ([]byte, error) {
			runs.Add(1)
			return big, nil
		}}
	}
	v, ran, err := g.Once(context.Background(), work("seq"))
	if err != nil || !ran || !bytes.Equal(v, big) {
		t.Fatalf("first: ran %t, err %v, %d bytes", ran, err, len(v))
	}
	var dups []error
	for range 2 {
		v, ran, err := g.Once(context.Background(), work("seq"))
		if ran || v != nil {
			err = errors.Join(err, errors.New("ran again"))
		}
		dups = append(dups, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("sequential: work ran %d times for one key, want 1", n)
	}
	for _, err := range dups {
		if !errors.Is(err, idem.ErrNotKept) {
			t.Fatalf("duplicate: %v, want ErrNotKept", err)
		}
	}

	runs.Store(0)
	const n = 8
	type result struct {
		v   []byte
		ran bool
		err error
	}
	out := make([]result, n)
	parallel(n, func(i int) {
		v, ran, err := g.Once(context.Background(), work("par"))
		out[i] = result{v, ran, err}
	})
	if got := runs.Load(); got != 1 {
		t.Fatalf("parallel: work ran %d times for one key, want 1", got)
	}
	firsts := 0
	for i, r := range out {
		switch {
		case r.err == nil && r.ran && bytes.Equal(r.v, big):
			firsts++
		case errors.Is(r.err, idem.ErrNotKept) && !r.ran:
		default:
			t.Fatalf("call %d: ran %t, err %v, %d bytes", i, r.ran, r.err, len(r.v))
		}
	}
	if firsts != 1 {
		t.Fatalf("parallel: %d calls got the value, want 1", firsts)
	}
}

// TestResponseNotKeptIsFinal: a duplicate of a not-kept outcome is
// answered as final long after the first request: past its lease, and
// once more after a 5xx or a handler error would have been retried.
func TestResponseNotKeptIsFinal(t *testing.T) {
	e := newEnv(t, nil)
	big := string(tooLarge())
	h := &handler{status: 200, body: big}
	first := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`))
	if first.StatusCode != 200 || first.Body != big {
		t.Fatalf("first: %d, %d bytes", first.StatusCode, len(first.Body))
	}
	e.clock.Advance(time.Hour) // far past any lease
	h.status, h.body = 201, `{"small":true}`
	r := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`))
	if h.Calls() != 1 {
		t.Fatalf("handler ran %d times, want 1", h.Calls())
	}
	hdr := http.Header{}
	for k, v := range r.Headers {
		hdr.Set(k, v)
	}
	wantNotKept(t, r.StatusCode, hdr, []byte(r.Body), 200, len(big))
	if r.Headers[idem.HeaderOpenWOPReplay] != "true" {
		t.Fatalf("not-kept answer lacks the replay header: %v", r.Headers)
	}
	if h.Calls() != 1 {
		t.Fatalf("handler ran %d times, want 1", h.Calls())
	}
	rec, found, err := e.store.Get(context.Background(), scopeID(testTenant, "POST /runs", testKey), e.clock.Now())
	if err != nil || !found || rec.State != idem.StateCompleted || rec.Response == nil ||
		rec.Response.NotKept != len(big) || rec.Response.Status != 200 || len(rec.Response.Body) != 0 {
		t.Fatalf("stored record: found %t, err %v, %+v", found, err, rec)
	}
}

// TestResponseNotKeptUnderObjectReplay: under the commerce policy, whose
// replays render the key's object as it is now (ReplayObject), a
// duplicate of a request whose response was not kept is still the final
// not-kept answer: the object is never loaded and nothing runs again.
func TestResponseNotKeptUnderObjectReplay(t *testing.T) {
	e := commerceGuard(t, time.Minute)
	a := &action{status: "completed"}
	big := string(tooLarge())
	var runs atomic.Int32
	do := func() events.APIGatewayV2HTTPResponse {
		ev := commerceEvent("POST", "POST /actions", "cart-42", `{"sku":"font-1"}`)
		r, err := e.guard.Do(context.Background(), idem.Request{Event: ev, Object: a.load}, func(context.Context) (events.APIGatewayV2HTTPResponse, error) {
			runs.Add(1)
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"}, Body: big}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if first := do(); first.StatusCode != 201 || first.Body != big {
		t.Fatalf("first: %d, %d bytes", first.StatusCode, len(first.Body))
	}
	var dups []events.APIGatewayV2HTTPResponse
	for range 2 {
		dups = append(dups, do())
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times for one key, want 1", n)
	}
	if n := a.loads.Load(); n != 0 {
		t.Fatalf("the object was loaded %d times for a not-kept outcome", n)
	}
	for _, r := range dups {
		hdr := http.Header{}
		for k, v := range r.Headers {
			hdr.Set(k, v)
		}
		wantNotKept(t, r.StatusCode, hdr, []byte(r.Body), 201, len(big))
		if r.Headers[commerce.HeaderIdempotentReplay] != "true" {
			t.Fatalf("not-kept answer lacks the commerce replay header: %v", r.Headers)
		}
	}
}

// smallStore refuses to keep a response body over limit (ErrTooLarge,
// nothing written), as a store keeping less than MaxResponseBytes would.
type smallStore struct {
	idem.Store
	limit int
}

func (s *smallStore) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	if r := out.Response; r != nil && r.NotKept == 0 && len(r.Body) > s.limit {
		return idem.ErrTooLarge
	}
	return s.Store.Complete(ctx, claim, out, now)
}

// TestStoreRefusingAResponseRecordsItNotKept: a store that refuses a
// response as too large (ErrTooLarge) gets the not-kept outcome written
// instead: the handler runs once, and its duplicates are the not-kept
// answer.
func TestStoreRefusingAResponseRecordsItNotKept(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) { c.Store = &smallStore{Store: c.Store, limit: 1000} })
	body := `"` + string(bytes.Repeat([]byte("y"), 2000)) + `"`
	h := &handler{status: 201, body: body}
	if first := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`)); first.StatusCode != 201 || first.Body != body {
		t.Fatalf("first: %d, %d bytes", first.StatusCode, len(first.Body))
	}
	r := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`))
	if h.Calls() != 1 {
		t.Fatalf("handler ran %d times, want 1", h.Calls())
	}
	hdr := http.Header{}
	for k, v := range r.Headers {
		hdr.Set(k, v)
	}
	wantNotKept(t, r.StatusCode, hdr, []byte(r.Body), 201, len(body))
}

// TestResponseNotKeptIsLogged: the first execution whose response is
// recorded as not kept logs one warning naming the status and the size
// (an operator's cue that a route outgrows the store), with the key's
// hash and never the key; its duplicate logs the not-kept replay.
func TestResponseNotKeptIsLogged(t *testing.T) {
	logs := &syncBuffer{}
	e := newEnv(t, func(c *idem.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	big := string(tooLarge())
	h := &handler{status: 200, body: big}
	for range 2 {
		e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`))
	}
	var warned, replayed int
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, testKey) {
			t.Fatalf("the raw key is logged: %s", line)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		switch m["msg"] {
		case "idempotency: response larger than the store keeps, recorded as not kept":
			warned++
			if m["level"] != "WARN" || m["status"] != float64(200) || m["size"] != float64(len(big)) || m["key_hash"] == nil || m["outcome"] != idem.OutcomeClaimed {
				t.Fatalf("warning: %v", m)
			}
		case "idempotency: replay of a response that was not kept":
			replayed++
		}
	}
	if warned != 1 || replayed != 1 {
		t.Fatalf("%d not-kept warnings and %d not-kept replays logged, want 1 and 1:\n%s", warned, replayed, logs.String())
	}
}

// TestHeadersOverTheRoomRunOnce: a handler answering an empty body with
// headers beyond the room every store keeps beside the body (the net/http
// middleware has no payload limit) runs once per key: the store refuses
// the response, the not-kept outcome is recorded instead, with the size
// of the response's stored form, and a duplicate is answered 410
// idemkit.response_not_kept, never by running the handler again.
func TestHeadersOverTheRoomRunOnce(t *testing.T) {
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("acme"), Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("h", 1<<20)
	var runs atomic.Int32
	h := g.Handle("POST /exports", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		for i := range 8 {
			w.Header().Set("X-Part-"+string(rune('A'+i)), value)
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	key := "key-headers-over-the-room-0123456789"
	if first := post(h, "/exports", key, `{"a":1}`); first.Code != http.StatusAccepted || first.Header().Get("X-Part-H") != value {
		t.Fatalf("first: %d, want 202 with its headers", first.Code)
	}
	dup := post(h, "/exports", key, `{"a":1}`)
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times for one key, want 1 (duplicate answered %d %.200s)", n, dup.Code, dup.Body.Bytes())
	}
	var env struct {
		Error   string         `json:"error"`
		Details map[string]any `json:"details"`
	}
	if err := json.Unmarshal(dup.Body.Bytes(), &env); err != nil || dup.Code != http.StatusGone || env.Error != idem.CodeResponseNotKept {
		t.Fatalf("duplicate: %d %.200s, want 410 %s", dup.Code, dup.Body.Bytes(), idem.CodeResponseNotKept)
	}
	if size, _ := env.Details["size"].(float64); env.Details["status"] != float64(http.StatusAccepted) || size <= 8<<20 {
		t.Fatalf("duplicate: details %v, want status 202 and the stored form's size (over 8 MB)", env.Details)
	}
}
