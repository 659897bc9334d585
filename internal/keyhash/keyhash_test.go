package keyhash

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/ledger/identity"
)

// TestSecretHashesAlikeInEveryProcess: two processes given the same secret
// hash a key identically; with no secret (the per-process salt) they
// differ; the hash never contains the key.
func TestSecretHashesAlikeInEveryProcess(t *testing.T) {
	if os.Getenv("KEYHASH_CHILD") == "1" {
		os.Stdout.WriteString(New(os.Getenv("KEYHASH_SECRET")).Log("key-0123456789abcdef") + "\n")
		os.Exit(0)
	}
	child := func(secret string) string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSecretHashesAlikeInEveryProcess$")
		cmd.Env = append(os.Environ(), "KEYHASH_CHILD=1", "KEYHASH_SECRET="+secret)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	a, b := child("s3cret"), child("s3cret")
	if a != b || !strings.HasPrefix(a, "kh:") || strings.Contains(a, "0123456789abcdef") {
		t.Fatalf("same secret: %q and %q", a, b)
	}
	if c := child("other"); c == a {
		t.Fatalf("another secret hashed alike: %q", c)
	}
	if x, y := child(""), child(""); x == y {
		t.Fatalf("no secret: two processes hashed alike (%q): the salt must be per process", x)
	}
	if New("").Log("k") != Log("k") || New("s3cret").Log("k") == Log("k") {
		t.Fatal("New(\"\") must be the per-process salt, New(secret) not")
	}
}

// TestFirstLogsFromManyGoroutinesAgree: the salt is drawn at the first Log,
// not at init; goroutines racing to be first all hash with the one salt, so
// a key hashes equal in every log line of the process (run with -race).
func TestFirstLogsFromManyGoroutinesAgree(t *testing.T) {
	const n = 16
	got := make([]string, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got[i] = Log("idempotency-key-0123456789abcdef")
		}()
	}
	close(start)
	wg.Wait()
	for _, h := range got {
		if h != got[0] {
			t.Fatalf("the same key hashed %s and %s in one process", got[0], h)
		}
	}
	if !strings.HasPrefix(got[0], "kh:") || len(got[0]) != 3+12 || strings.Contains(got[0], "0123456789abcdef") {
		t.Fatalf("log form %q", got[0])
	}
	if Log("another-key") == got[0] {
		t.Fatal("two keys hashed equal")
	}
}

// TestRedactEffectsHashesEffectIDsAndProviderKeys pins RedactEffects on the
// ids the ledger computes: every effect id and provider key in a text is
// replaced by its Log hash, run ids and other text are kept.
func TestRedactEffectsHashesEffectIDsAndProviderKeys(t *testing.T) {
	for _, tenant := range []string{"acme", "anon:x.y_z-1"} {
		act, err := identity.FromActivity(identity.Activity{Tenant: tenant, RunID: tenant + "/r", NodeID: "n"})
		if err != nil {
			t.Fatal(err)
		}
		bus, err := identity.FromBusiness(identity.Business{Tenant: tenant, Operation: "op", Key: "k"})
		if err != nil {
			t.Fatal(err)
		}
		const runID = "acme/bL357Djghl-66JmH-sUflQ"
		in := "ledger: effect " + act.EffectID + " in flight; " + bus.EffectID + ": run " + runID + " key " + act.ProviderKey + "\n" + act.EffectID
		want := "ledger: effect " + Log(act.EffectID) + " in flight; " + Log(bus.EffectID) + ": run " + runID + " key " + Log(act.ProviderKey) + "\n" + Log(act.EffectID)
		if got := RedactEffects(in); got != want {
			t.Errorf("RedactEffects(%q)\n = %q\nwant %q", in, got, want)
		}
	}
	for _, keep := range []string{"", "no ids here", "acme/bL357Djghl-66JmH-sUflQ", "/" + strings.Repeat("a", 43), // no tenant
		"acme/" + strings.Repeat("a", 44), "idemkit-" + strings.Repeat("a", 42), "xidemkit-" + strings.Repeat("a", 43)} {
		if got := RedactEffects(keep); got != keep {
			t.Errorf("RedactEffects(%q) = %q, want it unchanged", keep, got)
		}
	}
}

// TestErrAttrRedactsTheErrorText: ErrAttr is the "error" attribute with the
// error's text as RedactEffects leaves it.
func TestErrAttrRedactsTheErrorText(t *testing.T) {
	key := "idemkit-" + strings.Repeat("a", 43)
	a := ErrAttr(errors.New("ledger: key " + key + " refused"))
	if want := "ledger: key " + Log(key) + " refused"; a.Key != "error" || a.Value.String() != want {
		t.Errorf("ErrAttr = %s=%q, want error=%q", a.Key, a.Value.String(), want)
	}
}
