package idem_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// TestResponseAtTheLimitIsKept: a 2xx whose body is exactly
// MaxResponseBytes is kept and replayed byte-exactly to its duplicates
// under every registered policy; one byte more is recorded as not kept
// (410 for its duplicates). Guard.Once likewise: a value of exactly
// MaxResponseBytes is returned again to a duplicate, one byte more is
// ErrNotKept. The work runs once per key either way.
func TestResponseAtTheLimitIsKept(t *testing.T) {
	over := bytes.Repeat([]byte("y"), idem.MaxResponseBytes+1)
	over[0], over[len(over)-1] = '"', '"'
	at := append([]byte(nil), over[:idem.MaxResponseBytes]...)
	at[len(at)-1] = '"'
	for _, name := range idem.PolicyNames() {
		t.Run(name, func(t *testing.T) {
			p, _ := idem.PolicyNamed(name)
			g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("acme"), Policy: p,
				Wait: 2 * time.Minute, Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name string
				body []byte
				kept bool
			}{{"at the limit", at, true}, {"one byte over", over, false}} {
				t.Run(c.name, func(t *testing.T) {
					var runs atomic.Int32
					h := g.Handle("POST /exports", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						runs.Add(1)
						w.Header().Set("Content-Type", "application/json")
						w.Header().Set("X-Export", "part-1")
						w.WriteHeader(201)
						_, _ = w.Write(c.body)
					}))
					key := "key-limit-" + name + "-" + map[bool]string{true: "at", false: "over"}[c.kept] + "-0123456789"
					first := post(h, "/exports", key, `{"a":1}`)
					if first.Code != 201 || !bytes.Equal(first.Body.Bytes(), c.body) {
						t.Fatalf("first: %d, %d bytes; want 201 and the true %d bytes", first.Code, first.Body.Len(), len(c.body))
					}
					for i := range 2 {
						r := post(h, "/exports", key, `{"a":1}`)
						if !c.kept {
							wantNotKept(t, r.Code, r.Header(), r.Body.Bytes(), 201, len(c.body))
							continue
						}
						if r.Code != 201 || !bytes.Equal(r.Body.Bytes(), c.body) || r.Header().Get("X-Export") != "part-1" {
							t.Fatalf("duplicate %d: %d, %d bytes, X-Export %q; want the byte-exact replay", i+1, r.Code, r.Body.Len(), r.Header().Get("X-Export"))
						}
					}
					if n := runs.Load(); n != 1 {
						t.Fatalf("handler ran %d times for one key, want 1", n)
					}
				})
			}
		})
	}

	t.Run("Once", func(t *testing.T) {
		g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("acme"), Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			key  string
			v    []byte
			kept bool
		}{{"at", at, true}, {"over", over, false}} {
			var runs atomic.Int32
			w := idem.Work{Operation: "export", Key: c.key, Payload: []byte("p"), Run: func(context.Context) ([]byte, error) {
				runs.Add(1)
				return c.v, nil
			}}
			if v, ran, err := g.Once(context.Background(), w); err != nil || !ran || !bytes.Equal(v, c.v) {
				t.Fatalf("%s: first: ran %t, err %v, %d bytes", c.key, ran, err, len(v))
			}
			v, ran, err := g.Once(context.Background(), w)
			switch {
			case ran:
				t.Fatalf("%s: duplicate ran", c.key)
			case c.kept && (err != nil || !bytes.Equal(v, c.v)):
				t.Fatalf("%s: duplicate: err %v, %d bytes; want the value", c.key, err, len(v))
			case !c.kept && !errors.Is(err, idem.ErrNotKept):
				t.Fatalf("%s: duplicate: err %v, want ErrNotKept", c.key, err)
			}
			if n := runs.Load(); n != 1 {
				t.Fatalf("%s: work ran %d times, want 1", c.key, n)
			}
		}
	})
}
