package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// losingProxy forwards every request to the engine at endpoint and
// passes its answer back, headers and all, but for the first request of
// each operation in lose: that one the engine applies, and its answer is
// lost on the wire (the connection closed unanswered), so the SDK sends
// it again. It returns the proxy's URL.
func losingProxy(t *testing.T, endpoint string, lose ...string) string {
	t.Helper()
	var mu sync.Mutex
	pending := map[string]bool{}
	for _, op := range lose {
		pending[op] = true
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, endpoint+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			t.Errorf("proxy: %v", err)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Errorf("proxy: %v", err)
			return
		}
		answer, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Errorf("proxy: %v", err)
			return
		}
		_, op, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
		mu.Lock()
		lost := pending[op]
		delete(pending, op)
		mu.Unlock()
		if lost {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(answer)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestEnginesAnswerLostOnTheWireThenRetriedIsAccepted: on each engine the
// project runs, a write whose answer is lost on the wire (the engine
// applied it) and whose retry the engine answers passes the check of
// DynamoDB's headers (RED_TEAM 372): `apikey create` prints a key the
// authorizer accepts, `webhook secret rotate` a secret the executor
// reads, exit 0, as without the check.
func TestEnginesAnswerLostOnTheWireThenRetriedIsAccepted(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		table := e.CreateTable(t, "ApiKeysTable")
		proxy := losingProxy(t, e.Endpoint, "PutItem")
		var out, errb bytes.Buffer
		code := run(ctx, []string{"apikey", "create", "--tenant", "acme", "--endpoint", proxy, "--table", table, "--region", e.Region}, &out, &errb)
		key := strings.TrimSuffix(out.String(), "\n")
		authz := &authfn.Handler{Keys: &apikeys.DynamoKeys{Client: e.Client(), Table: table}}
		r, err := authz.Handle(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": "Bearer " + key}})
		if code != 0 || key == "" || err != nil && !errors.Is(err, authfn.ErrUnauthorized) || !r.IsAuthorized {
			t.Fatalf("apikey create, its answer lost: exit %d, stderr %q, authorized %v (%v); want 0 and a key the authorizer accepts", code, errb.String(), r.IsAuthorized, err)
		}

		proxy = losingProxy(t, e.Endpoint, "GetItem", "PutItem")
		out.Reset()
		errb.Reset()
		code = run(ctx, []string{"webhook", "secret", "rotate", "--tenant", "acme", "--endpoint", proxy, "--table", table, "--region", e.Region}, &out, &errb)
		s, perr := apikeys.ParseSigningSecret(strings.TrimSuffix(out.String(), "\n"))
		got, err := (&apikeys.SigningSecrets{Client: e.Client(), Table: table}).WebhookSecrets(ctx, "acme")
		if code != 0 || perr != nil || err != nil || len(got) != 1 || !bytes.Equal(got[0], s) {
			t.Fatalf("webhook secret rotate, its answers lost: exit %d, stdout %q, stderr %q, the executor reads %d secrets (%v); want 0 and the secret printed", code, out.String(), errb.String(), len(got), err)
		}
	})
}
