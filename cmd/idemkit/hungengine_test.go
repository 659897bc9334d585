package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestEngineThatNeverAnswersEndsTheCommand: an --endpoint that accepts
// the connection and never answers (an engine hung or paused, another
// service's port) ends a day-two command with exit 1 after a bounded wait
// per try, saying the engine did not answer, instead of waiting until
// Ctrl-C. The bound is cut short here (engineAnswerTimeout). Failed before
// the fix: the command still waited when the test's 30 s guard ended it.
func TestEngineThatNeverAnswersEndsTheCommand(t *testing.T) {
	fakeAWSCredentials(t)
	defer func(d time.Duration) { engineAnswerTimeout = d }(engineAnswerTimeout)
	engineAnswerTimeout = 200 * time.Millisecond
	engine := hungEngine(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"effects", "list", "--endpoint", engine}, "idemkit effects list: DynamoDB Scan failed: no answer within 200ms"},
		{[]string{"doctor", "--only", "idempotency", "--endpoint", engine}, "idemkit doctor: describe idemkit-IdempotencyTable: DynamoDB DescribeTable failed: no answer within 200ms"},
		{[]string{"tables", "create", "--only", "idempotency", "--endpoint", engine}, "DynamoDB CreateTable failed: no answer within 200ms"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var out, errb bytes.Buffer
		code := run(ctx, c.args, &out, &errb)
		guard := ctx.Err()
		cancel()
		msg := errb.String()
		if guard != nil || code != 1 || !strings.Contains(msg, c.want) || !strings.Contains(msg, "--endpoint") {
			t.Errorf("idemkit %v: exit %d (guard %v), stderr %q; want 1 and %q", c.args, code, guard, msg, c.want)
		}
		for _, s := range append(sdkNoise, "net/http", "awaiting") {
			if strings.Contains(msg, s) {
				t.Errorf("idemkit %v: stderr says %q: %q", c.args, s, msg)
			}
		}
	}
}
