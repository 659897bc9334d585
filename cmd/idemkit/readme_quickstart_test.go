package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httputil"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestReadmeQuickstart runs the README's quickstart on `idemkit dev` with
// its default engine (DynamoDB Local) and checks each output the README
// shows: the start-up lines with the two demo keys, the same key twice
// (the second answer a replay; another body is a mismatch, another
// tenant's key is refused), and `idemkit conform` with both keys; and
// functions/QUICKSTART.md's two answers of step 2, and its step 3's
// claims that a create without a key is a new run each time and a read
// without a credential 401. The
// README writes the default address, http://127.0.0.1:3000; the test's
// free address stands for it.
func TestReadmeQuickstart(t *testing.T) {
	if _, err := exec.LookPath("java"); err != nil {
		testutil.Unavailable(t, "the quickstart's default engine, DynamoDB Local, needs java: %v", err)
	}
	readme := filepath.Join(shared.ModuleRoot(), "README.md")
	out, url := startDevInProcess(t)
	asShown := func(s string) string { return strings.ReplaceAll(s, url, "http://127.0.0.1:3000") }
	if err := testutil.MatchShown(testutil.ShownOutput(t, readme, "TestReadmeQuickstart/start"), asShown(out.text())); err != nil {
		t.Fatal(err)
	}
	keys := regexp.MustCompile(`(?m)^demo API key for tenant demo-[ab]: (idk_\S+)$`).FindAllStringSubmatch(out.text(), -1)
	if len(keys) != 2 {
		t.Fatalf("want two demo keys:\n%s", out.text())
	}
	key, keyB := keys[0][1], keys[1][1]

	ik := "quickstart-" + strings.Repeat("0", 11) + "-" + keyB[len(keyB)-8:]
	post := func(body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", url+"/runs", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Idempotency-Key", ik)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		dump, err := httputil.DumpResponse(resp, true)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return resp, asShown(string(dump))
	}
	first, firstDump := post(`{"workflowId":"conformance-noop"}`)
	second, dump := post(`{"workflowId":"conformance-noop"}`)
	if first.StatusCode != 201 || first.Header.Get("Openwop-Idempotent-Replay") != "" || second.Header.Get("Openwop-Idempotent-Replay") != "true" {
		t.Fatalf("first %d %v, second %v", first.StatusCode, first.Header, second.Header)
	}
	if err := testutil.MatchShown(testutil.ShownOutput(t, readme, "TestReadmeQuickstart/replay"), dump); err != nil {
		t.Fatal(err)
	}
	// functions/QUICKSTART.md shows the same two answers with the run id of
	// the run it was captured from, which stands for this run's.
	quickstart := filepath.Join(shared.ModuleRoot(), "functions", "QUICKSTART.md")
	opaque := regexp.MustCompile(`/runs/demo-a~2F([A-Za-z0-9_-]+)`).FindStringSubmatch(second.Header.Get("Location"))
	if opaque == nil {
		t.Fatalf("Location %q names no run of demo-a", second.Header.Get("Location"))
	}
	asQuickstart := func(s string) string { return strings.ReplaceAll(s, opaque[1], "EiKM5ObBRNnkb8eIZbJ4Sw") }
	for name, got := range map[string]string{"quickstart-first": firstDump, "quickstart-replay": dump} {
		if err := testutil.MatchShown(testutil.ShownOutput(t, quickstart, "TestReadmeQuickstart/"+name), asQuickstart(got)); err != nil {
			t.Errorf("functions/QUICKSTART.md, %s: %v", name, err)
		}
	}
	// Without a key each create is a new run; without a credential it is 401.
	noKey := func() string {
		code, m := devCall(t, "POST", url+"/runs", key, `{"workflowId":"conformance-noop"}`)
		if code != 201 {
			t.Fatalf("a create without a key: %d %v", code, m)
		}
		return m["runId"].(string)
	}
	if a, b := noKey(), noKey(); a == b {
		t.Errorf("two creates without a key made one run, %s", a)
	}
	if code, m := devCall(t, "GET", strings.Replace(second.Header.Get("Location"), "http://127.0.0.1:3000", url, 1), "", ""); code != 401 || m["error"] != "unauthenticated" {
		t.Errorf("reading the run without a key: %d %v, want 401 unauthenticated (functions/QUICKSTART.md, step 3)", code, m)
	}
	if r, d := post(`{"workflowId":"conformance-noop","inputs":{"other":1}}`); r.StatusCode != 409 || !strings.Contains(d, `"idempotency_key_mismatch"`) {
		t.Fatalf("another body under the same key: %s", d)
	}
	runPath := strings.Replace(second.Header.Get("Location"), "http://127.0.0.1:3000", url, 1)
	if code, m := devCall(t, "GET", runPath, keyB, ""); code != 403 || m["error"] != "id_tenant_mismatch" {
		t.Fatalf("another tenant's key reading the run: %d %v", code, m)
	}

	var stdout, stderr bytes.Buffer
	if code := runConform(context.Background(), []string{"--api-key", key, "--api-key", keyB, url}, &stdout, &stderr); code != 0 {
		t.Fatalf("idemkit conform: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if err := testutil.MatchShown(testutil.ShownOutput(t, readme, "TestReadmeQuickstart/conform"), stdout.String()); err != nil {
		t.Fatal(err)
	}
}
