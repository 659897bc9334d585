package conform

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestGetIgnoresKeySkipsWithoutAResourceID: checking an API whose created
// answer names no runId or id (the README's orders function answers
// {"orderId", "item", "qty"} and serves no GET), get-ignores-key has no
// resource to read: it is skipped, saying why, never failed with a hint
// (--get) that cannot help, since a GET path must hold {id} (RED_TEAM 590).
// Before, it failed "the created answer has no runId or id to GET (set the
// GET path)", and conform exited 1 on an API that broke no rule.
func TestGetIgnoresKeySkipsWithoutAResourceID(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost && r.URL.Path == "/orders" {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"item":"book","orderId":"ord_1","qty":1}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":"not_found","message":"no route serves this path"}`))
	}))
	defer srv.Close()
	rs, err := Run(context.Background(), Config{BaseURL: srv.URL, APIKeys: []string{"k"}, Route: "POST /orders",
		Body: `{"item":"book","qty":1}`, Timeout: 5 * time.Second, Stagger: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Scenario != "get-ignores-key" {
			continue
		}
		if r.Status != Skip || !strings.Contains(r.Detail, "runId or id") || strings.Contains(r.Detail, "set the GET path") {
			t.Fatalf("get-ignores-key: %s %s, want a skip saying the created answer names no runId or id", r.Status, r.Detail)
		}
		return
	}
	t.Fatalf("no get-ignores-key result:\n%s", dump(rs))
}
