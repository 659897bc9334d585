package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestTablesCreateWriteLostThenFailedSaysItMayExist (RED_TEAM 368): a
// `tables create` whose CreateTable (or a later write setting the table
// up) landed with its answer lost, then was throttled until the SDK gave
// up, says the change may have been made and that running it again
// finishes it, exit 1; before it said only "DynamoDB CreateTable failed:
// …" of a table that existed. Run again, it succeeds. A throttle alone
// (every try answered) carries no such note. On the emulators.
func TestTablesCreateWriteLostThenFailedSaysItMayExist(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		for _, c := range []struct {
			op   string
			lost bool
		}{{"CreateTable", true}, {"UpdateContinuousBackups", true}, {"CreateTable", false}} {
			prefix := fmt.Sprintf("tl%d-", time.Now().UnixNano())
			cli := func() (int, string, string) {
				var out, errb bytes.Buffer
				code := run(ctx, []string{"tables", "create", "--only", "api-keys", "--prefix", prefix, "--endpoint", e.Endpoint, "--region", e.Region}, &out, &errb)
				return code, out.String(), errb.String()
			}
			f := dynamotest.NewFaults()
			if c.lost {
				f.FailNextAfterSend(c.op, 1, dynamotest.ResponseLost())
				f.FailNext(c.op, 2, dynamotest.Throttle())
			} else {
				f.FailNext(c.op, 3, dynamotest.Throttle())
			}
			setEndpointClientOptions(t, dynamotest.FastRetries, f.Middleware())
			code, out, errb := cli()
			setEndpointClientOptions(t)
			if f.Pending() != 0 {
				t.Fatalf("%s: %d faults not fired", c.op, f.Pending())
			}
			note := strings.Contains(errb, "may have been made") && strings.Contains(errb, "run the same command again")
			if code != 1 || strings.Count(errb, "\n") != 1 || !strings.Contains(errb, c.op) || note != c.lost || inLibrarysWords(errb) {
				t.Fatalf("%s, lost %v: exit %d stdout %q stderr %q; want 1, one line, the note %v", c.op, c.lost, code, out, errb, c.lost)
			}
			if code, out, errb := cli(); code != 0 || !strings.Contains(out, prefix+"ApiKeysTable") {
				t.Fatalf("run again: exit %d stdout %q stderr %q; want the table", code, out, errb)
			}
		}
	})
}
