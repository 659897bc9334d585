package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestInterruptedStoreCallIsSaidPlainly: Ctrl-C while a command waits for
// its engine (one that accepted the connection and does not answer) ends
// the command with exit 1 and says it was interrupted, for a write that
// its outcome is unknown, not the SDK's "https response error StatusCode:
// 0, RequestID: , canceled, context canceled". Failed before the fix: that
// text.
func TestInterruptedStoreCallIsSaidPlainly(t *testing.T) {
	fakeAWSCredentials(t)
	engine := hungEngine(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"effects", "list", "--endpoint", engine}, "idemkit effects list: DynamoDB Scan failed: interrupted before it was answered"},
		{[]string{"doctor", "--only", "idempotency", "--endpoint", engine}, "idemkit doctor: describe idemkit-IdempotencyTable: DynamoDB DescribeTable failed: interrupted before it was answered"},
		{[]string{"apikey", "create", "--tenant", "acme", "--endpoint", engine}, "idemkit apikey create: put api key: DynamoDB PutItem failed: interrupted before it was answered: the write may have been applied"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel) // the Ctrl-C
		var out, errb bytes.Buffer
		code := run(ctx, c.args, &out, &errb)
		cancel()
		msg := errb.String()
		if code != 1 || !strings.Contains(msg, c.want) {
			t.Errorf("idemkit %v: exit %d, stderr %q; want 1 and %q", c.args, code, msg, c.want)
		}
		for _, s := range append(sdkNoise, "context canceled") {
			if strings.Contains(msg, s) {
				t.Errorf("idemkit %v: stderr says %q: %q", c.args, s, msg)
			}
		}
	}
}
