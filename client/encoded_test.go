package client

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// gzipGateway stands for a gateway that compresses answers (API Gateway's
// content encoding, a compression middleware outside the Guard): it gzips
// every answer to a request that accepts gzip.
type gzipGateway struct{ base http.RoundTripper }

func (g gzipGateway) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.base.RoundTrip(req)
	if err != nil || !strings.Contains(req.Header.Get("Accept-Encoding"), "gzip") {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write(b)
	_ = zw.Close()
	resp.Header.Set("Content-Encoding", "gzip")
	resp.Header.Del("Content-Length")
	resp.ContentLength = int64(z.Len())
	resp.Body = io.NopCloser(&z)
	return resp, nil
}

func gunzipped(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Content-Encoding") != "gzip" {
		return string(b)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// A caller that asks for compressed answers (Accept-Encoding: gzip, so the
// standard library leaves the body as sent) behind a gateway that
// compresses them gets the in-flight answer of each policy gzipped: the
// OpenWOP and ERP policies' 409 and the commerce policy's pending 202. The
// client reads the code through the content coding, so it polls them as
// it polls the plain ones, and the caller receives the first request's
// answer as a replay; the request ran once.
func TestEncodedInFlightAnswerIsPolled(t *testing.T) {
	for _, p := range []idem.Policy{idem.PolicyOpenWOP, erp.Policy, commerce.Policy} {
		t.Run(p.Name, func(t *testing.T) {
			f := newSlowFirst(t, p, "/orders/42/refund")
			clk, key, url := f.clk, f.key, f.url
			c := &http.Client{Transport: &Transport{Config: Config{Base: gzipGateway{http.DefaultTransport}, Now: clk.Now, Sleep: clk.Sleep}}}
			var res Result
			req, _ := http.NewRequestWithContext(WithResult(WithKey(context.Background(), key), &res), http.MethodPost, url, strings.NewReader(`{"reason":"late"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept-Encoding", "gzip")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("duplicate: %v (result %+v)", err, res)
			}
			defer resp.Body.Close()
			body := gunzipped(t, resp)
			f.free()
			<-f.firstDone
			if resp.StatusCode != 201 || body != f.first || !res.Replayed || f.runs != 1 {
				t.Fatalf("duplicate got %d %s (first %s), result %+v, runs %d: the compressed in-flight answer was final", resp.StatusCode, body, f.first, res, f.runs)
			}
		})
	}
}

// A compressed 5xx whose code the error registry marks not retriable is
// final, as the plain one is; a compressed 409 mismatch stays final.
func TestEncodedFinalCodesAreFinal(t *testing.T) {
	for _, first := range []step{envelope(500, "credential_unavailable"), envelope(409, "idempotency_key_mismatch")} {
		s := newScripted(t, first, status(201))
		var w waits
		cfg := fastConfig(&w)
		cfg.Base = gzipGateway{http.DefaultTransport}
		cl := mustNew(t, cfg)
		req, _ := http.NewRequest(http.MethodPost, s.srv.URL, strings.NewReader(`{}`))
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := gunzipped(t, resp.Response)
		resp.Body.Close()
		if resp.Attempts != 1 || s.count() != 1 || resp.StatusCode == 201 {
			t.Fatalf("status %d %s, result %+v, server %d: a compressed final answer was retried", resp.StatusCode, body, resp.Result, s.count())
		}
	}
}

// The code of an error answer is read through each content coding the
// standard library reads, and the body is handed on as sent.
func TestPeekCodeReadsContentCodings(t *testing.T) {
	const env = `{"error":"idempotency_in_flight","message":"m"}`
	gz := func(b []byte) []byte {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		_, _ = w.Write(b)
		_ = w.Close()
		return z.Bytes()
	}
	zl := func(b []byte) []byte {
		var z bytes.Buffer
		w := zlib.NewWriter(&z)
		_, _ = w.Write(b)
		_ = w.Close()
		return z.Bytes()
	}
	raw := func(b []byte) []byte {
		var z bytes.Buffer
		w, _ := flate.NewWriter(&z, flate.DefaultCompression)
		_, _ = w.Write(b)
		_ = w.Close()
		return z.Bytes()
	}
	for _, c := range []struct {
		codings string
		body    []byte
	}{
		{"gzip", gz([]byte(env))},
		{"x-gzip", gz([]byte(env))},
		{"deflate", zl([]byte(env))},
		{"deflate", raw([]byte(env))},
		{"gzip, deflate", zl(gz([]byte(env)))},
		{"identity, gzip", gz([]byte(env))},
	} {
		resp := &http.Response{StatusCode: 409, Header: http.Header{"Content-Encoding": {c.codings}}, Body: io.NopCloser(bytes.NewReader(c.body))}
		if v, cut := classify(resp, DefaultInFlightCodes); v != inFlight || cut {
			t.Errorf("%s: verdict %v cut %v, want in flight", c.codings, v, cut)
		}
		if b, _ := io.ReadAll(resp.Body); !bytes.Equal(b, c.body) {
			t.Errorf("%s: the body was not handed on as sent", c.codings)
		}
	}
}
