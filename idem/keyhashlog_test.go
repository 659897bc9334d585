package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/idem/event"
	"github.com/idemkit/idemkit/idem/idemenv"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
)

// sqsLogLines runs one SQS record whose handler fails under a Guard with
// secret, and returns the JSON log lines.
func sqsLogLines(t *testing.T, secret string, key func(events.SQSMessage) (string, error), m events.SQSMessage) []map[string]any {
	t.Helper()
	e := newEnv(t, nil)
	g, err := idem.New(idem.Config{Store: e.store, Tenant: idem.SingleTenant("shop"), Test: idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: e.clock.Now}}, KeyHashSecret: secret,
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h, err := event.SQS(g, event.SQSConfig{Operation: "ship", Key: key}, func(context.Context, events.SQSMessage) error {
		return errors.New("downstream refused " + m.Body)
	})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{m}})
	if len(r.BatchItemFailures) != 1 {
		t.Fatalf("failures %+v", r.BatchItemFailures)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		lines = append(lines, v)
	}
	return lines
}

// failureLines are the lines of lines at WARN or above.
func failureLines(lines []map[string]any) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["level"] == "WARN" || l["level"] == "ERROR" {
			out = append(out, l)
		}
	}
	return out
}

// TestSQSRecordFailureIsLoggedOnceWithItsMessageID: a failed SQS record is
// logged once, with the operation, the outcome, the message id as it is
// and the key as its hash; the raw key (derived from the body here) never
// appears in any line.
func TestSQSRecordFailureIsLoggedOnceWithItsMessageID(t *testing.T) {
	const rawKey = "order-secret-0123456789"
	m := events.SQSMessage{MessageId: "4f1c9a3e-message-id", Body: rawKey}
	lines := sqsLogLines(t, "", func(m events.SQSMessage) (string, error) { return m.Body, nil }, m)
	f := failureLines(lines)
	if len(f) != 1 {
		t.Fatalf("%d failure lines, want 1: %v", len(f), lines)
	}
	l := f[0]
	if l["message_id"] != m.MessageId || l["operation"] != "ship" || l["outcome"] != "handler-error" ||
		!strings.HasPrefix(l["key_hash"].(string), "kh:") {
		t.Fatalf("failure line %v", l)
	}
	for _, l := range lines {
		if b, _ := json.Marshal(l); strings.Contains(string(b), rawKey) {
			t.Fatalf("the raw key is in a log line: %s", b)
		}
	}
}

// TestKeyHashSecretHashesAKeyAlikeInEveryGuard: two Guards (as two Lambda
// instances) with the same KeyHashSecret log one key under the same hash;
// without a secret, or with another, the hashes differ.
func TestKeyHashSecretHashesAKeyAlikeInEveryGuard(t *testing.T) {
	m := events.SQSMessage{MessageId: "m-1", Body: "order-42"}
	key := func(m events.SQSMessage) (string, error) { return m.Body, nil }
	hash := func(secret string) string {
		return failureLines(sqsLogLines(t, secret, key, m))[0]["key_hash"].(string)
	}
	a, b := hash("shared-secret"), hash("shared-secret")
	if a != b {
		t.Fatalf("same secret: %s and %s", a, b)
	}
	if c := hash("other-secret"); c == a {
		t.Fatalf("another secret hashed alike: %s", c)
	}
	if d := hash(""); d == a {
		t.Fatalf("no secret hashed like the secret: %s", d)
	}
	env, err := idemenv.Load(func(k string) string {
		if k == idemenv.KeyHashSecret {
			return "shared-secret"
		}
		return ""
	})
	if err != nil || env.KeyHashSecret != "shared-secret" {
		t.Fatalf("LoadEnv: %+v %v", env, err)
	}
	var c idem.Config
	env.Apply(&c)
	if c.KeyHashSecret != "shared-secret" {
		t.Fatal("Env.Apply does not carry KeyHashSecret")
	}
}
