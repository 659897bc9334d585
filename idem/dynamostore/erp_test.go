package dynamostore_test

// The ERP service's policy, behaviour by behaviour, through the Guard on
// DynamoDB (every engine). Each test is named after the behaviour it proves.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemkit/idemkit/functions/host/workorder"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// erpKey is a key of the ERP grammar that the OpenWOP grammar refuses (a
// colon, 24 characters).
func erpKey() string { return "ERP-WO-" + strings.ToUpper(rnd(4)) + ":" + rnd(4) }

// erpGuard is a Guard under the ERP policy on v's store.
func erpGuard(t *testing.T, st idem.Store, clk *clock.Manual, mod func(*idem.Config)) *idem.Guard {
	t.Helper()
	cfg := idem.Config{
		Policy: erp.Policy,
		Tenant: idem.AuthorizerKey("tenantId"),
		Store:  st,
		Test:   idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clk.Now}},
		Wait:   -1,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	g, err := idem.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// spyStore wraps a Store: it remembers the ID of the last Claim and closes
// renewed on the first Renew.
type spyStore struct {
	idem.Store
	mu      sync.Mutex
	lastID  string
	once    sync.Once
	renewed chan struct{}
}

func spy(s idem.Store) *spyStore { return &spyStore{Store: s, renewed: make(chan struct{})} }

func (s *spyStore) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	s.mu.Lock()
	s.lastID = rec.ID
	s.mu.Unlock()
	return s.Store.Claim(ctx, rec, now)
}

func (s *spyStore) Renew(ctx context.Context, id, owner string, leaseExpires, now time.Time) error {
	err := s.Store.Renew(ctx, id, owner, leaseExpires, now)
	s.once.Do(func() { close(s.renewed) })
	return err
}

// last returns the record of the last Claim.
func (s *spyStore) last(t *testing.T, now time.Time) idem.Record {
	t.Helper()
	s.mu.Lock()
	id := s.lastID
	s.mu.Unlock()
	rec, ok, err := s.Store.Get(ctxT(t), id, now)
	if err != nil || !ok {
		t.Fatalf("Get(%s): found %v, %v", id, ok, err)
	}
	return rec
}

// TestERPLeaseHonouredInsideLambda: IDEMPOTENCY_PROCESSING_LEASE_SECONDS
// (Config.Lease) is the lease inside Lambda too. An invocation with more
// time left than the lease claims exactly Lease and renews it by heartbeat;
// one with less time left claims its remaining time plus the skew margin
// (never more than Lease) and needs no renewal.
func TestERPLeaseHonouredInsideLambda(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		st := spy(v.s)
		g := erpGuard(t, st, clk, func(c *idem.Config) {
			c.Lease = 60 * time.Second
			c.Heartbeat = 50 * time.Millisecond
			c.LeaseSkew = 10 * time.Second
		})
		lambda := func(timeout time.Duration) (context.Context, context.CancelFunc) {
			ctx := lambdacontext.NewContext(ctxT(t), &lambdacontext.LambdaContext{AwsRequestID: "aws-" + rnd(4)})
			return context.WithTimeout(ctx, timeout)
		}
		leaseOf := func() time.Duration { return st.last(t, clk.Now()).LeaseExpires.Sub(clk.Now()) }

		// 15 minutes left, a 60 s lease: the lease is 60 s, renewed.
		ctx, cancel := lambda(15 * time.Minute)
		defer cancel()
		ev := guardEvent(erpKey(), `{"n":1}`)
		var long time.Duration
		renewed := false
		h := &countingHandler{before: func(context.Context, int32) {
			long = leaseOf()
			select {
			case <-st.renewed:
				renewed = true
			case <-time.After(30 * time.Second): // a bound on a heartbeat every 50 ms, not a timing assertion
			}
		}}
		if r, err := g.HTTPAPI(h.serve)(ctx, ev); err != nil || r.StatusCode != 201 {
			t.Fatalf("long invocation: %+v %v", r, err)
		}
		if long != 60*time.Second {
			t.Fatalf("lease with 15 min left = %s, want the configured 60s", long)
		}
		if !renewed {
			t.Fatalf("the lease of an invocation that may outlive it was never renewed")
		}

		// 20 s left: capped at remaining time + 10 s skew, below the 60 s lease.
		ctx2, cancel2 := lambda(20 * time.Second)
		defer cancel2()
		ev2 := guardEvent(erpKey(), `{"n":2}`)
		var short time.Duration
		h2 := &countingHandler{before: func(context.Context, int32) { short = leaseOf() }}
		if r, err := g.HTTPAPI(h2.serve)(ctx2, ev2); err != nil || r.StatusCode != 201 {
			t.Fatalf("short invocation: %+v %v", r, err)
		}
		if short <= 10*time.Second || short > 30*time.Second {
			t.Fatalf("lease with 20 s left = %s, want the remaining time plus 10 s skew (10s..30s)", short)
		}
	})
}

// TestERPKeyWhitespaceRejectedOnRawHeader: leading or trailing whitespace in
// the Idempotency-Key header as API Gateway delivers it (HTTP API and REST
// API events carry the raw value) is 400 idempotency_key_invalid with
// details.reason "whitespace": the key is never trimmed into a valid one.
// Nothing reaches the store. (net/http trims a header's surrounding
// whitespace before any handler sees it; see
// TestERPKeyWhitespaceInvisibleToNetHTTP in package idem.)
func TestERPKeyWhitespaceRejectedOnRawHeader(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := erpGuard(t, v.s, clk, nil)
		h := &countingHandler{}
		key := erpKey()
		for _, raw := range []string{" " + key, key + " ", "\t" + key, key + "\t", " " + key + " "} {
			v.cnt.Reset()
			ev := guardEvent(raw, `{"n":1}`)
			r := call(t, g.HTTPAPI(h.serve), ev)
			if r.StatusCode != 400 || !strings.Contains(r.Body, `"whitespace"`) {
				t.Fatalf("HTTP API key %q: %d %s, want 400 whitespace", raw, r.StatusCode, r.Body)
			}
			rest := events.APIGatewayProxyRequest{
				HTTPMethod: "POST", Resource: "/runs", Body: `{"n":1}`,
				Headers:           map[string]string{"Content-Type": "application/json"},
				MultiValueHeaders: map[string][]string{"Idempotency-Key": {raw}},
				RequestContext:    events.APIGatewayProxyRequestContext{RequestID: "req-" + rnd(4), Authorizer: map[string]any{"tenantId": "acme"}},
			}
			rr, err := g.REST(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				h.runs.Add(1)
				return events.APIGatewayProxyResponse{StatusCode: 201}, nil
			})(ctxT(t), rest)
			if err != nil || rr.StatusCode != 400 || !strings.Contains(rr.Body, `"whitespace"`) {
				t.Fatalf("REST API key %q: %d %s %v, want 400 whitespace", raw, rr.StatusCode, rr.Body, err)
			}
			if n := v.cnt.Total(); n != 0 {
				t.Fatalf("key %q: %d store round trips, want 0", raw, n)
			}
		}
		if n := h.runs.Load(); n != 0 {
			t.Fatalf("handler ran %d times for keys with whitespace", n)
		}
		// The same key without whitespace is accepted.
		if r := call(t, g.HTTPAPI(h.serve), guardEvent(key, `{"n":1}`)); r.StatusCode != 201 {
			t.Fatalf("clean key: %d %s", r.StatusCode, r.Body)
		}
	})
}

// TestERPDuplicateKeyHeadersRejected: two Idempotency-Key headers are
// 400 idempotency_key_invalid with details.reason "multiple", whether they
// arrive as two values (REST multiValueHeaders) or folded into one
// comma-joined value (how API Gateway HTTP APIs and proxies join repeated
// headers). The handler never runs and nothing reaches the store.
func TestERPDuplicateKeyHeadersRejected(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := erpGuard(t, v.s, clk, nil)
		h := &countingHandler{}
		k1, k2 := erpKey(), erpKey()
		v.cnt.Reset()
		r := call(t, g.HTTPAPI(h.serve), guardEvent(k1+","+k2, `{"n":1}`))
		if r.StatusCode != 400 || !strings.Contains(r.Body, `"multiple"`) {
			t.Fatalf("HTTP API, joined keys: %d %s, want 400 multiple", r.StatusCode, r.Body)
		}
		same := call(t, g.HTTPAPI(h.serve), guardEvent(k1+","+k1, `{"n":1}`))
		if same.StatusCode != 400 || !strings.Contains(same.Body, `"multiple"`) {
			t.Fatalf("HTTP API, the same key twice: %d %s, want 400 multiple", same.StatusCode, same.Body)
		}
		rest := events.APIGatewayProxyRequest{
			HTTPMethod: "POST", Resource: "/runs", Body: `{"n":1}`,
			MultiValueHeaders: map[string][]string{"Idempotency-Key": {k1, k1}},
			RequestContext:    events.APIGatewayProxyRequestContext{RequestID: "req-" + rnd(4), Authorizer: map[string]any{"tenantId": "acme"}},
		}
		rr, err := g.REST(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			h.runs.Add(1)
			return events.APIGatewayProxyResponse{StatusCode: 201}, nil
		})(ctxT(t), rest)
		if err != nil || rr.StatusCode != 400 || !strings.Contains(rr.Body, `"multiple"`) {
			t.Fatalf("REST API, two headers: %d %s %v, want 400 multiple", rr.StatusCode, rr.Body, err)
		}
		if n := v.cnt.Total(); n != 0 || h.runs.Load() != 0 {
			t.Fatalf("duplicate keys: %d round trips, %d executions; want 0, 0", n, h.runs.Load())
		}
	})
}

// TestERPRawBodySHA256StoredBesideCanonicalHash: the record keeps the
// SHA-256 of the raw body as received (after base64 decoding), beside the
// request digest, for archive; it is never compared, so a replay is decided
// by the digest alone.
func TestERPRawBodySHA256StoredBesideCanonicalHash(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		st := spy(v.s)
		g := erpGuard(t, st, clk, nil)
		h := &countingHandler{}
		key := erpKey()
		// Key order and spacing differ: the canonical (JCS) digest is the
		// same, the raw bytes are not.
		first, second := `{"b":2,"a":1}`, `{ "a": 1, "b": 2 }`
		if r := call(t, g.HTTPAPI(h.serve), guardEvent(key, first)); r.StatusCode != 201 {
			t.Fatalf("first: %d %s", r.StatusCode, r.Body)
		}
		rec := st.last(t, clk.Now())
		sum := sha256.Sum256([]byte(first))
		if rec.RawBodySHA256 != hex.EncodeToString(sum[:]) || rec.Digest == "" {
			t.Fatalf("record raw_body_sha256 = %q (digest %q), want %x", rec.RawBodySHA256, rec.Digest, sum)
		}
		if raw := v.raw(t, rec.ID); raw["rawBodySha256"] == nil {
			t.Fatalf("stored item has no rawBodySha256 attribute: %s", names(raw))
		}
		r := call(t, g.HTTPAPI(h.serve), guardEvent(key, second))
		if r.StatusCode != 201 || r.Headers[erp.HeaderReplayed] != "true" || h.runs.Load() != 1 {
			t.Fatalf("same canonical body, other bytes: %d %v, %d executions; want a replay", r.StatusCode, r.Headers, h.runs.Load())
		}

		// A base64 body is hashed as the bytes it decodes to.
		key2 := erpKey()
		ev := guardEvent(key2, "eyJhIjoxfQ==") // {"a":1}
		ev.IsBase64Encoded = true
		if r := call(t, g.HTTPAPI(h.serve), ev); r.StatusCode != 201 {
			t.Fatalf("base64 body: %d %s", r.StatusCode, r.Body)
		}
		rec2 := st.last(t, clk.Now())
		if want := rawSHA256([]byte(`{"a":1}`)); rec2.RawBodySHA256 != want {
			t.Fatalf("base64 body raw_body_sha256 = %q, want %q", rec2.RawBodySHA256, want)
		}
	})
}

// workOrderEvent is a keyed request on the live work-order route.
func workOrderEvent(key, contentType, body string) events.APIGatewayV2HTTPRequest {
	ev := guardEvent(key, body)
	ev.RouteKey = workorder.RouteLive
	ev.Headers["content-type"] = contentType
	return ev
}

const (
	woJSON = `{"work_order_number":"WO-1","projects":[{"code":"p-1","name":"Pump","quantity":2},{"code":"P-2","name":"Valve","quantity":1}]}`
	// The same work order in XML, with other spacing and a lower-case code
	// that normalisation upper-cases.
	woXML = `<?xml version="1.0"?>
<work_order>
  <work_order_number> WO-1 </work_order_number>
  <projects>
    <project><code>P-1</code><name>Pump</name><quantity>2</quantity></project>
    <project><code>p-2</code><name> Valve</name><quantity>1</quantity></project>
  </projects>
</work_order>`
	woXMLOther = `<work_order><work_order_number>WO-1</work_order_number><projects>
    <project><code>P-1</code><name>Pump</name><quantity>3</quantity></project></projects></work_order>`
)

// workOrderGuard is an ERP guard with the work-order contract on the live
// route and the test route opted out.
func workOrderGuard(t *testing.T, st idem.Store, clk *clock.Manual, mod func(*idem.Config)) *idem.Guard {
	return erpGuard(t, st, clk, func(c *idem.Config) {
		c.Routes = map[string]idem.Route{
			workorder.RouteLive: {Contract: workorder.Contract()},
			workorder.RouteTest: {Skip: true},
		}
		if mod != nil {
			mod(c)
		}
	})
}

// woHandler answers a work order with its number and project count, in
// JSON (the logical response), from the request idem decoded.
type woHandler struct {
	runs    atomic.Int32
	decoded atomic.Int32
	status  int
}

func (h *woHandler) serve(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	n := h.runs.Add(1)
	v, ok := idem.DecodedRequest(ctx)
	if ok {
		h.decoded.Add(1)
	}
	w, err := workorder.From(v, ok, ev.Headers["content-type"], []byte(ev.Body))
	if err != nil {
		return events.APIGatewayV2HTTPResponse{StatusCode: 400, Body: `{"error":"validation_error","message":"bad work order"}`,
			Headers: map[string]string{"Content-Type": "application/json"}}, nil
	}
	st := h.status
	if st == 0 {
		st = 201
	}
	body, _ := json.Marshal(map[string]any{"work_order_number": w.Number, "projects": len(w.Projects), "execution": n})
	return events.APIGatewayV2HTTPResponse{StatusCode: st, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(body)}, nil
}

// TestERPCanonicalHashJSONAndXMLEqual: the digest is the canonical request
// hash, taken after decode, normalisation and validation: a work order sent
// as JSON and then, under the same key, as the same work order in XML (other
// spacing, other letter case where normalisation folds it) is a replay, not
// a mismatch, and runs once; an XML work order that differs in substance is
// 409 under the same key.
func TestERPCanonicalHashJSONAndXMLEqual(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := workOrderGuard(t, v.s, clk, nil)
		h := &woHandler{}
		key := erpKey()
		first := call(t, g.HTTPAPI(h.serve), workOrderEvent(key, "application/json", woJSON))
		if first.StatusCode != 201 || h.decoded.Load() != 1 {
			t.Fatalf("JSON work order: %d %s (decoded handed to the handler %d times)", first.StatusCode, first.Body, h.decoded.Load())
		}
		xmlReq := call(t, g.HTTPAPI(h.serve), workOrderEvent(key, "application/xml; charset=utf-8", woXML))
		if xmlReq.StatusCode != 201 || xmlReq.Headers[erp.HeaderReplayed] != "true" || xmlReq.Body != first.Body {
			t.Fatalf("the same work order in XML: %d %v %s, want the JSON original's answer replayed", xmlReq.StatusCode, xmlReq.Headers, xmlReq.Body)
		}
		other := call(t, g.HTTPAPI(h.serve), workOrderEvent(key, "text/xml", woXMLOther))
		if other.StatusCode != 409 {
			t.Fatalf("another work order in XML under the key: %d %s, want 409", other.StatusCode, other.Body)
		}
		if n := h.runs.Load(); n != 1 {
			t.Fatalf("handler ran %d times, want 1", n)
		}
	})
}

// TestERPReplayRenderedPerAccept: the stored response is the logical one;
// each answer is rendered per its own request's Accept, so a JSON original
// is replayed as XML to Accept: application/xml, and as JSON again after.
// Accept is not part of the hash.
func TestERPReplayRenderedPerAccept(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := workOrderGuard(t, v.s, clk, nil)
		h := &woHandler{}
		key := erpKey()
		ev := workOrderEvent(key, "application/json", woJSON)
		ev.Headers["accept"] = "application/json"
		first := call(t, g.HTTPAPI(h.serve), ev)
		if first.StatusCode != 201 || !strings.HasPrefix(first.Headers["Content-Type"], "application/json") {
			t.Fatalf("first: %d %v %s", first.StatusCode, first.Headers, first.Body)
		}
		ev = workOrderEvent(key, "application/json", woJSON)
		ev.Headers["accept"] = "application/xml"
		x := call(t, g.HTTPAPI(h.serve), ev)
		var got struct {
			XMLName   xml.Name `xml:"response"`
			Number    string   `xml:"work_order_number"`
			Projects  int      `xml:"projects"`
			Execution int      `xml:"execution"`
		}
		if x.StatusCode != 201 || x.Headers[erp.HeaderReplayed] != "true" || x.Headers["Content-Type"] != "application/xml" ||
			xml.Unmarshal([]byte(x.Body), &got) != nil || got.Number != "WO-1" || got.Projects != 2 || got.Execution != 1 {
			t.Fatalf("replay with Accept: application/xml: %d %v %s", x.StatusCode, x.Headers, x.Body)
		}
		ev = workOrderEvent(key, "application/xml", woXML)
		ev.Headers["accept"] = "application/json;q=0.9, application/xml;q=0.1"
		j := call(t, g.HTTPAPI(h.serve), ev)
		if j.StatusCode != 201 || j.Body != first.Body || j.Headers[erp.HeaderReplayed] != "true" {
			t.Fatalf("XML request preferring JSON: %d %v %s, want the JSON original", j.StatusCode, j.Headers, j.Body)
		}
		if n := h.runs.Load(); n != 1 {
			t.Fatalf("handler ran %d times, want 1", n)
		}
		// The stored response is the logical (JSON) one.
		rec := call(t, g.HTTPAPI(h.serve), workOrderEvent(key, "application/json", woJSON))
		if rec.Body != first.Body {
			t.Fatalf("stored response %s, want the JSON original", rec.Body)
		}
	})
}

// TestERPCanonicalHashAfterValidation: a body the contract refuses (invalid,
// or of a media type it does not take) is answered before any claim — 400
// validation_error naming the field, 415 — and records nothing: zero store
// round trips, and the key then runs a valid work order.
func TestERPCanonicalHashAfterValidation(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := workOrderGuard(t, v.s, clk, nil)
		h := &woHandler{}
		key := erpKey()
		v.cnt.Reset()
		bad := call(t, g.HTTPAPI(h.serve), workOrderEvent(key, "application/json", `{"work_order_number":"WO-1","projects":[{"code":"P-1","quantity":0}]}`))
		if bad.StatusCode != 400 || !strings.Contains(bad.Body, `/projects/0/quantity`) {
			t.Fatalf("invalid work order: %d %s, want 400 naming /projects/0/quantity", bad.StatusCode, bad.Body)
		}
		csv := call(t, g.HTTPAPI(h.serve), workOrderEvent(key, "text/csv", "WO-1,P-1,2"))
		if csv.StatusCode != 415 {
			t.Fatalf("text/csv work order: %d %s, want 415", csv.StatusCode, csv.Body)
		}
		if n := v.cnt.Total(); n != 0 || h.runs.Load() != 0 {
			t.Fatalf("refused bodies: %d round trips, %d executions; want 0, 0", n, h.runs.Load())
		}
		if ok := call(t, g.HTTPAPI(h.serve), workOrderEvent(key, "application/json", woJSON)); ok.StatusCode != 201 || ok.Headers[erp.HeaderReplayed] != "false" {
			t.Fatalf("valid work order after refused ones: %d %v", ok.StatusCode, ok.Headers)
		}
	})
}

// TestERPCanonicalHashIncludesContractVersion: the endpoint contract
// version is hashed: the same key and body under a new contract version is
// 409, never the old version's answer.
func TestERPCanonicalHashIncludesContractVersion(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		h := &woHandler{}
		key := erpKey()
		g1 := workOrderGuard(t, v.s, clk, nil)
		if r := call(t, g1.HTTPAPI(h.serve), workOrderEvent(key, "application/json", woJSON)); r.StatusCode != 201 {
			t.Fatalf("v1: %d %s", r.StatusCode, r.Body)
		}
		v2 := workorder.Contract()
		v2.Version = "inbound-work-orders/v2"
		g2 := workOrderGuard(t, v.s, clk, func(c *idem.Config) { c.Routes[workorder.RouteLive] = idem.Route{Contract: v2} })
		if r := call(t, g2.HTTPAPI(h.serve), workOrderEvent(key, "application/json", woJSON)); r.StatusCode != 409 {
			t.Fatalf("same key and body under contract v2: %d %s, want 409", r.StatusCode, r.Body)
		}
	})
}

// TestERPCanonicalHashExcludesRequestMetadata: request id, X-Request-ID,
// timestamps, Authorization, tokens, remote IP, User-Agent and Accept are
// not hashed: a retry that differs only in them is a replay.
func TestERPCanonicalHashExcludesRequestMetadata(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := workOrderGuard(t, v.s, clk, nil)
		h := &woHandler{}
		key := erpKey()
		ev := workOrderEvent(key, "application/json", woJSON)
		ev.Headers["authorization"] = "Bearer token-one"
		ev.Headers["user-agent"] = "erp-client/1"
		ev.Headers["x-request-id"] = "client-req-1"
		ev.RequestContext.HTTP.SourceIP = "10.0.0.1"
		ev.RequestContext.TimeEpoch = 1
		if r := call(t, g.HTTPAPI(h.serve), ev); r.StatusCode != 201 {
			t.Fatalf("first: %d %s", r.StatusCode, r.Body)
		}
		ev2 := workOrderEvent(key, "application/json", woJSON)
		ev2.Headers["authorization"] = "Bearer token-two"
		ev2.Headers["user-agent"] = "erp-client/2"
		ev2.Headers["x-request-id"] = "client-req-2"
		ev2.Headers["accept"] = "application/xml"
		ev2.RequestContext.HTTP.SourceIP = "10.9.9.9"
		ev2.RequestContext.TimeEpoch = 2
		clk.Advance(time.Minute)
		if r := call(t, g.HTTPAPI(h.serve), ev2); r.StatusCode != 201 || r.Headers[erp.HeaderReplayed] != "true" {
			t.Fatalf("retry differing in request metadata only: %d %v %s, want a replay", r.StatusCode, r.Headers, r.Body)
		}
		if n := h.runs.Load(); n != 1 {
			t.Fatalf("handler ran %d times, want 1", n)
		}
	})
}

// TestERPTestRouteNeverTouchesStore: the public format-validation route
// needs no key and never acquires, replays or writes a record — with no key,
// a valid key, a malformed key or two keys it runs the handler, and the
// store sees zero round trips; the ERP headers are not added.
func TestERPTestRouteNeverTouchesStore(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := workOrderGuard(t, v.s, clk, func(c *idem.Config) { c.Required = true })
		h := &woHandler{}
		v.cnt.Reset()
		for _, key := range []string{"", erpKey(), " bad key ", erpKey() + "," + erpKey()} {
			ev := workOrderEvent(key, "application/json", woJSON)
			ev.RouteKey = workorder.RouteTest
			if key == "" {
				delete(ev.Headers, "idempotency-key")
			}
			for range 2 {
				r := call(t, g.HTTPAPI(h.serve), ev)
				if r.StatusCode != 201 || r.Headers[erp.HeaderReplayed] != "" || r.Headers[idem.HeaderKey] != "" {
					t.Fatalf("test route with key %q: %d %v %s", key, r.StatusCode, r.Headers, r.Body)
				}
			}
		}
		if n := v.cnt.Total(); n != 0 {
			t.Fatalf("test route: %d store round trips %v, want 0", n, v.cnt.Ops())
		}
		if n := h.runs.Load(); n != 8 {
			t.Fatalf("test route ran the handler %d times, want 8 (every request)", n)
		}
		// The live route next to it requires the key.
		ev := workOrderEvent("", "application/json", woJSON)
		delete(ev.Headers, "idempotency-key")
		if r := call(t, g.HTTPAPI(h.serve), ev); r.StatusCode != 400 {
			t.Fatalf("live route without a key: %d %s, want 400", r.StatusCode, r.Body)
		}
	})
}

// TestERPFailedRetryable: an unexpected 5xx, or the handler failing because
// its database is unavailable (an error), leaves the record failed and
// retryable: a later request with the same key and hash takes ownership
// (attempt 2, 3) and runs again, one with another payload is
// IDEMPOTENCY_KEY_CONFLICT and never does; a deterministic business answer — 409 with
// the service's own code — is stored and replayed.
func TestERPFailedRetryable(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		st := spy(v.s)
		g := workOrderGuard(t, st, clk, nil)
		key := erpKey()
		var step atomic.Int32
		attempts := []int{}
		var mu sync.Mutex
		handler := func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			ci, _ := idem.FromContext(ctx)
			mu.Lock()
			attempts = append(attempts, ci.Attempt)
			mu.Unlock()
			switch step.Add(1) {
			case 1:
				return events.APIGatewayV2HTTPResponse{StatusCode: 503, Body: `{"error":"DATABASE_UNAVAILABLE","message":"down"}`}, nil
			case 2:
				return events.APIGatewayV2HTTPResponse{}, errors.New("database unavailable")
			}
			return events.APIGatewayV2HTTPResponse{StatusCode: 409, Headers: map[string]string{"Content-Type": "application/json"},
				Body: `{"error":"NO_PROJECT_PROCESSED","message":"No project was processed."}`}, nil
		}
		ev := func() events.APIGatewayV2HTTPRequest { return workOrderEvent(key, "application/json", woJSON) }
		if r := call(t, g.HTTPAPI(handler), ev()); r.StatusCode != 503 {
			t.Fatalf("first: %d", r.StatusCode)
		}
		if rec := st.last(t, clk.Now()); rec.State != idem.StateRetryableFailure {
			t.Fatalf("after a 5xx the record is %s, want %s", rec.State, idem.StateRetryableFailure)
		}
		// Only the same hash may take a failed record over.
		other := workOrderEvent(key, "application/xml", woXMLOther)
		if r := call(t, g.HTTPAPI(handler), other); r.StatusCode != 409 || !strings.Contains(r.Body, erp.CodeKeyConflict) {
			t.Fatalf("another payload on the failed record: %d %s, want %s", r.StatusCode, r.Body, erp.CodeKeyConflict)
		}
		if r := call(t, g.HTTPAPI(handler), ev()); r.StatusCode != 500 {
			t.Fatalf("second (database unavailable): %d", r.StatusCode)
		}
		if rec := st.last(t, clk.Now()); rec.State != idem.StateRetryableFailure {
			t.Fatalf("after a handler error the record is %s, want %s", rec.State, idem.StateRetryableFailure)
		}
		third := call(t, g.HTTPAPI(handler), ev())
		if third.StatusCode != 409 || !strings.Contains(third.Body, "NO_PROJECT_PROCESSED") || third.Headers[erp.HeaderReplayed] != "false" {
			t.Fatalf("third: %d %s", third.StatusCode, third.Body)
		}
		fourth := call(t, g.HTTPAPI(handler), ev())
		// The replay is the stored answer, its envelope's request_id the
		// current attempt's (every ERP envelope carries it).
		want := strings.Replace(third.Body, third.Headers[erp.HeaderRequestID], fourth.Headers[erp.HeaderRequestID], 1)
		if fourth.StatusCode != 409 || fourth.Body != want || !strings.Contains(want, `"request_id"`) || fourth.Headers[erp.HeaderReplayed] != "true" {
			t.Fatalf("the deterministic 409 was not replayed: %d %v %s", fourth.StatusCode, fourth.Headers, fourth.Body)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(attempts) != 3 || attempts[0] != 1 || attempts[1] != 2 || attempts[2] != 3 {
			t.Fatalf("attempts %v, want [1 2 3]", attempts)
		}
	})
}

// rawSHA256 is the lowercase hex SHA-256 of a raw body: what a record's
// RawBodySHA256 holds (the ERP policy's raw_body_sha256).
func rawSHA256(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}
