//go:build chaos

package dynamostore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// reclaimCounter counts the claims the store reports as lease reclaims.
type reclaimCounter struct {
	idem.Store
	n atomic.Int32
}

func (s *reclaimCounter) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, rec, now)
	if err == nil && res.Decision == idem.Reclaimed && res.LeaseExpired {
		s.n.Add(1)
	}
	return res, err
}

// chaosExec is one execution of the handler for one tenant's key.
type chaosExec struct {
	n        int
	epoch    int64 // the clock jumps before it started
	released bool  // it answered a status the policy releases, or panicked
	body     string
	start    time.Time
	end      time.Time
	answer   string // what its client was answered
}

// chaosSlot rides in a request's context: the clock jumps before the
// request was sent, and the execution it ran (if any).
type chaosSlot struct {
	sent int64
	exec *chaosExec
}

type chaosSlotKey struct{}

type chaosKey struct {
	mu    sync.Mutex
	execs []*chaosExec
	// finals are the final (2xx) answers the clients got; fresh is the
	// execution whose fresh final answer a client got (0: none).
	finals []string
	fresh  []int
}

// history describes the executions so far (k.mu held).
func (k *chaosKey) history() string {
	var b []byte
	for _, x := range k.execs {
		b = fmt.Appendf(b, "[%d: epoch %d released %t ended %t answered %.120s] ", x.n, x.epoch, x.released, !x.end.IsZero(), x.answer)
	}
	return string(b)
}

// TestChaosGuard: randomized faults against the Guard over the DynamoDB
// store on a real engine (exploratory, built only with the chaos tag:
// dynamotest.ChaosKnobs, docs/TESTING.md). Each round sends parallel
// duplicates of a few keys (two tenants share each key string;
// bodies the same or not) while faults are armed at random on the store's
// client; the handler answers 201, a released 503, panics, jumps the clock
// past the lease, or does its work and then has every write of its
// completion fail (a crash between the work and the record). Checked: a
// handler runs again only after a released answer or a clock jump (an ended
// lease); no two executions of a key overlap within one lease; every final
// answer of a key is byte-identical and names that tenant, key and body;
// after the faults stop and the lease ends every key answers for good
// (nothing stuck); the reclaims metric equals the store's lease reclaims.
func TestChaosGuard(t *testing.T) {
	rounds, seed := dynamotest.ChaosKnobs()
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		r := dynamotest.NewLockedRand(seed, 0x1de)
		const leaseD = 30 * time.Second
		clk := clock.NewManual(time.Now())
		var epoch atomic.Int64
		var calm atomic.Bool // the handler answers 201 and arms nothing
		jump := func() {
			epoch.Add(1)
			clk.Advance(leaseD + time.Second)
		}
		metrics := &testutil.Counts{}
		st := &reclaimCounter{Store: v.s}
		g, err := idem.New(idem.Config{
			Tenant: idem.AuthorizerKey("tenantId"), Store: st, Lease: leaseD, Wait: 300 * time.Millisecond, Metrics: metrics,
			Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clk.Now,
				// Renewals every few milliseconds of real time, so that
				// faults hit them while handlers run.
				NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) {
					tk := time.NewTicker(3 * time.Millisecond)
					return tk.C, tk.Stop
				}}},
			Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		keys := map[string]*chaosKey{}
		keyOf := func(tk string) *chaosKey {
			mu.Lock()
			defer mu.Unlock()
			if keys[tk] == nil {
				keys[tk] = &chaosKey{}
			}
			return keys[tk]
		}
		var violations atomic.Int32
		fail := func(format string, a ...any) {
			violations.Add(1)
			t.Errorf(format, a...)
		}
		handler := func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			tenant := ev.RequestContext.Authorizer.Lambda["tenantId"].(string)
			tk := tenant + "/" + ev.Headers["idempotency-key"]
			k := keyOf(tk)
			sum := sha256.Sum256([]byte(ev.Body))
			slot := ctx.Value(chaosSlotKey{}).(*chaosSlot)
			k.mu.Lock()
			// x.epoch is the jumps before the request was sent (so
			// before its claim); now those before it ran. A lease that a
			// jump ended was taken before that jump.
			x := &chaosExec{n: len(k.execs) + 1, epoch: slot.sent, start: time.Now()}
			now := epoch.Load()
			slot.exec = x
			for _, o := range k.execs {
				switch {
				case o.end.IsZero() && o.epoch == now:
					fail("%s: execution %d started while execution %d ran within its lease (%s)", tk, x.n, o.n, k.history())
				case !o.end.IsZero() && !o.released && o.epoch == now && o.n == x.n-1:
					fail("%s: execution %d started after execution %d ended unreleased, with no lease end between (%s)", tk, x.n, o.n, k.history())
				}
			}
			k.execs = append(k.execs, x)
			k.mu.Unlock()
			x.body = fmt.Sprintf(`{"tenant":%q,"key":%q,"execution":%d,"body":%q}`, tenant, tk, x.n, hex.EncodeToString(sum[:8]))
			resp := events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"}, Body: x.body}
			finish := func(released bool) {
				k.mu.Lock()
				x.released, x.end = released, time.Now()
				k.mu.Unlock()
			}
			time.Sleep(time.Duration(r.IntN(15)) * time.Millisecond)
			a := r.IntN(20)
			if calm.Load() {
				a = 19
			}
			switch {
			case a < 2:
				finish(true)
				resp.StatusCode = 503
				return resp, nil
			case a < 3:
				finish(true)
				panic("chaos: handler panics")
			case a < 5:
				// The clock jumps past the lease while the handler runs.
				jump()
				time.Sleep(time.Duration(r.IntN(10)) * time.Millisecond)
			case a < 6:
				// The work is done; every write of the completion then
				// fails (the process dies before its record).
				v.f.FailNext(dynamotest.AnyOp, 8, dynamotest.Throttle())
			case a < 9:
				dynamotest.ArmRandomFault(r, v.f)
			}
			finish(false)
			return resp, nil
		}
		w := g.HTTPAPI(handler)
		send := func(tenant, key, body string) events.APIGatewayV2HTTPResponse {
			ev := guardEvent(key, body)
			ev.RequestContext.Authorizer.Lambda["tenantId"] = tenant
			slot := &chaosSlot{sent: epoch.Load()}
			ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), chaosSlotKey{}, slot), 2*time.Minute)
			defer cancel()
			resp, err := w(ctx, ev)
			if err != nil {
				fail("%s/%s: adapter error %v", tenant, key, err)
			}
			tk := tenant + "/" + key
			if x := slot.exec; x != nil {
				k := keyOf(tk)
				k.mu.Lock()
				x.answer = strconv.Itoa(resp.StatusCode) + " " + resp.Body
				k.mu.Unlock()
			}
			if resp.StatusCode/100 == 2 {
				var got struct{ Tenant, Key, Body string }
				if err := json.Unmarshal([]byte(resp.Body), &got); err != nil {
					fail("%s: 2xx body %q", tk, resp.Body)
				}
				sum := sha256.Sum256([]byte(body))
				if got.Tenant != tenant || got.Key != tk || got.Body != hex.EncodeToString(sum[:8]) {
					fail("%s: answered another request's answer %s (its body %q)", tk, resp.Body, body)
				}
				k := keyOf(tk)
				k.mu.Lock()
				k.finals = append(k.finals, resp.Body)
				if resp.Headers[idem.HeaderOpenWOPReplay] != "true" {
					var n struct{ Execution int }
					_ = json.Unmarshal([]byte(resp.Body), &n)
					k.fresh = append(k.fresh, n.Execution)
				}
				k.mu.Unlock()
			}
			return resp
		}
		tenants := []string{"acme", "globex"}
		for round := range rounds {
			calm.Store(false)
			v.f.Clear()
			var armed []string
			for range r.IntN(6) {
				armed = append(armed, dynamotest.ArmRandomFault(r, v.f))
			}
			var roundKeys []string
			for range 1 + r.IntN(3) {
				roundKeys = append(roundKeys, newKey())
			}
			var wg sync.WaitGroup
			for _, key := range roundKeys {
				for _, tenant := range tenants {
					for range 2 + r.IntN(4) {
						body := `{"a":1}`
						if r.IntN(4) == 0 {
							body = `{"a":2}`
						}
						wg.Add(1)
						go func() {
							defer wg.Done()
							send(tenant, key, body)
						}()
					}
				}
			}
			wg.Wait()
			// The faults stop and every lease ends: each key answers for
			// good, byte-exactly the same on a second request.
			v.f.Clear()
			jump()
			calm.Store(true)
			for _, key := range roundKeys {
				for _, tenant := range tenants {
					tk := tenant + "/" + key
					var final events.APIGatewayV2HTTPResponse
					for _, body := range []string{`{"a":1}`, `{"a":2}`} {
						resp := send(tenant, key, body)
						if resp.StatusCode/100 == 2 {
							final = resp
						} else if code, _ := envelopeCode(t, resp.Body); code != "idempotency_key_mismatch" {
							fail("%s: after the faults and the lease, body %s answered %d %s", tk, body, resp.StatusCode, resp.Body)
						}
					}
					if final.StatusCode == 0 {
						fail("%s: no body answered 2xx after the faults and the lease", tk)
					}
					k := keyOf(tk)
					k.mu.Lock()
					for _, f := range k.finals {
						if f != k.finals[0] {
							fail("%s: two final answers: %s and %s", tk, k.finals[0], f)
						}
					}
					if len(k.fresh) > 1 {
						fail("%s: fresh final answers from executions %v", tk, k.fresh)
					}
					for _, x := range k.execs {
						if len(k.fresh) == 1 && x.n > k.fresh[0] {
							fail("%s: execution %d ran after execution %d's answer was recorded", tk, x.n, k.fresh[0])
						}
					}
					k.mu.Unlock()
				}
			}
			if got, want := int(metrics.Get(idem.MetricReclaims)), int(st.n.Load()); got != want {
				fail("round %d: reclaims metric %d, the store reported %d lease reclaims", round, got, want)
			}
			if violations.Load() > 0 {
				t.Fatalf("round %d (seed %d, faults armed %v): %d violations", round, seed, armed, violations.Load())
			}
		}
		execs := 0
		for _, k := range keys {
			execs += len(k.execs)
		}
		t.Logf("%s: %d rounds, %d keys, %d executions, %d faults fired, %d lease reclaims", e.Kind, rounds, len(keys), execs, v.f.Fired(), st.n.Load())
	})
}
