package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestDevSignsDeliveriesOfATenantWithASecret (RED_TEAM 340): under
// `idemkit dev`, a secret set by `idemkit webhook secret rotate` against
// dev's engine signs that tenant's deliveries (checked by a verifier
// written here from the Standard Webhooks definition), and another
// tenant's deliveries go unsigned, as before. On moto.
func TestDevSignsDeliveriesOfATenantWithASecret(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("dsig%d-", time.Now().UnixNano())
	_, url := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix,
		"--api-key", "idk_sig_acme_0123456789=acme", "--api-key", "idk_sig_globex_0123456789=globex", "--allow-loopback-webhooks")
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"webhook", "secret", "rotate", "--tenant", "acme", "--endpoint", e.Endpoint, "--table", prefix + "ApiKeysTable"}, &out, &errb); code != 0 {
		t.Fatalf("rotate: %d %s", code, errb.String())
	}
	secret := strings.TrimSpace(out.String())
	type got struct {
		tenant string
		h      http.Header
		body   []byte
	}
	recv := make(chan got, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		recv <- got{strings.TrimPrefix(r.URL.Path, "/"), r.Header.Clone(), b}
	}))
	defer srv.Close()
	for key, tenant := range map[string]string{"idk_sig_acme_0123456789": "acme", "idk_sig_globex_0123456789": "globex"} {
		if code, m := devCall(t, "POST", url+"/runs", key, `{"workflowId":"webhook","inputs":{"url":"`+srv.URL+`/`+tenant+`","payload":{"n":1}}}`); code != 201 {
			t.Fatalf("%s: %d %v", tenant, code, m)
		}
	}
	verify := func(h http.Header, body []byte) bool {
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "." + string(body)))
		want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
		for _, s := range strings.Fields(h.Get("webhook-signature")) {
			if hmac.Equal([]byte(s), []byte(want)) {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case d := <-recv:
			seen[d.tenant] = true
			switch d.tenant {
			case "acme":
				if !verify(d.h, d.body) || d.h.Get("Idempotency-Key") == "" {
					t.Fatalf("acme's delivery does not verify under its secret: %v", d.h)
				}
			case "globex":
				if d.h.Get("webhook-signature") != "" || d.h.Get("webhook-id") != "" || d.h.Get("webhook-timestamp") != "" {
					t.Fatalf("globex has no secret, yet its delivery is signed: %v", d.h)
				}
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("deliveries seen: %v; want acme's and globex's", seen)
		}
	}
}
