package emulator

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestIsMotoWithMuchData: a moto server that holds more than a megabyte of
// data (a few hundred runs through idemkit dev) is still told to be moto,
// so dev reaches it one request at a time (RED_TEAM 586). Before, IsMoto
// decoded the whole GET /moto-api/data.json dump through a 1 MB limit, and
// a server past it read as another engine: dev reached it directly, and
// moto's non-atomic conditional writes interleaved.
func TestIsMotoWithMuchData(t *testing.T) {
	big := `{"dynamodb": {"Table": [` + strings.Repeat(`{"name": "x"},`, 200_000) + `{"name": "y"}]}}`
	cases := []struct {
		name   string
		config bool // the server answers GET /moto-api/config (moto 4 and later)
		data   string
		want   bool
	}{
		{"moto with its config endpoint, 2.8 MB of data", true, big, true},
		{"an older moto without it, 2.8 MB of data", false, big, true},
		{"an older moto without it, little data", false, `{"dynamodb": {}}`, true},
		{"an older moto without it, a dump that is no JSON object", false, `[1, 2]`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodGet && r.URL.Path == "/moto-api/config" && c.config:
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusCreated) // moto answers a read of its config 201
					_, _ = w.Write([]byte(`{"batch": {"use_docker": true}, "lambda": {"use_docker": true}}`))
				case r.Method == http.MethodGet && r.URL.Path == "/moto-api/data.json":
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(c.data))
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			if got := IsMoto(context.Background(), srv.URL); got != c.want {
				t.Fatalf("IsMoto = %v, want %v", got, c.want)
			}
		})
	}
}

// TestIsMotoNotOtherEngines: an engine that answers the moto paths with an
// error, or with a JSON error body and a 4xx as DynamoDB Local and dynalite
// do, is not moto.
func TestIsMotoNotOtherEngines(t *testing.T) {
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusForbidden} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"__type":"com.amazon.coral.service#UnknownOperationException"}`))
		}))
		if IsMoto(context.Background(), srv.URL) {
			t.Errorf("a server answering %d is taken for moto", status)
		}
		srv.Close()
	}
}
