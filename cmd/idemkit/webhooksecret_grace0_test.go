package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestGraceZeroSaysTheMinuteThePreviousSecretSigns (RED_TEAM 447): each
// executor rereads a tenant's signing secrets at most once a minute, so
// after `webhook secret rotate --grace 0` it may sign with the previous
// secret alone for up to a minute. Nothing `webhook secret rotate` says
// (its help, its --grace refusal, its refusal at the grace bound, CLI.md)
// may say that the previous secret stops "at once": a receiver told so
// drops it at once and refuses genuine deliveries, which fail for good
// when refused with a 4xx. Each says the minute, and the help and CLI.md
// tell the receiver to refuse such a delivery with a 503, which is tried
// again (signed with the new secret once the minute has passed). The same
// for a tenant's first rotation: its deliveries may go unsigned for that
// minute.
func TestGraceZeroSaysTheMinuteThePreviousSecretSigns(t *testing.T) {
	ctx := context.Background()
	check := func(what, text string, want ...string) {
		t.Helper()
		if strings.Contains(text, "stops at once") || strings.Contains(text, "stops signing at once") || strings.Contains(text, "secret at once") {
			t.Errorf("%s says the previous secret stops at once:\n%s", what, text)
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s does not say %q:\n%s", what, w, text)
			}
		}
	}
	var out, errb bytes.Buffer
	run(ctx, []string{"webhook", "secret", "rotate", "-h"}, &out, &errb)
	check("the help", strings.Join(strings.Fields(out.String()), " "), "--grace 0 stops the previous secret within a minute", "503",
		"its first rotation starts signing them within a minute")
	out.Reset()
	errb.Reset()
	run(ctx, []string{"webhook", "secret", "rotate", "--tenant", "acme", "--grace", "5s"}, &out, &errb)
	check("the --grace refusal", errb.String(), "within a minute")
	doc, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(doc)[strings.Index(string(doc), "## `idemkit webhook secret rotate`"):]
	sec = sec[:strings.Index(sec[3:], "\n## ")+3]
	check("CLI.md", strings.Join(strings.Fields(sec), " "), "`0` stops the previous secret within a minute", "503",
		"its first rotation starts signing them within a minute")

	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("g0%d-", time.Now().UnixNano())
	if code := run(ctx, []string{"tables", "create", "--only", "api-keys", "--prefix", prefix, "--endpoint", e.Endpoint}, &bytes.Buffer{}, &errb); code != 0 {
		t.Fatalf("tables create: %d %s", code, errb.String())
	}
	for i := 0; i < 6; i++ {
		out.Reset()
		errb.Reset()
		code := run(ctx, []string{"webhook", "secret", "rotate", "--tenant", "acme", "--grace", "1h", "--endpoint", e.Endpoint, "--table", prefix + "ApiKeysTable"}, &out, &errb)
		if i < 5 && code != 0 {
			t.Fatalf("rotation %d: exit %d %s", i+1, code, errb.String())
		}
		if i == 5 {
			if code != 1 {
				t.Fatalf("the rotation past the bound: exit %d %s", code, errb.String())
			}
			check("the refusal at the bound", errb.String(), "--grace 0", "within a minute")
		}
	}
}
