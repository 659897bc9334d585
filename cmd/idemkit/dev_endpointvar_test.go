package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDevEmulatorFlagOverridesTheEndpointVariable: DYNAMODB_ENDPOINT stands
// for --dynamodb-endpoint only when --emulator is not given; with
// --emulator the flag wins, dev says on stderr that the variable is not
// used before it starts its engine, and its help says so (RED_TEAM 393:
// the help said the variable "stands for --dynamodb-endpoint", which with
// --emulator is a usage error, and dev started its own engine without a
// word).
func TestDevEmulatorFlagOverridesTheEndpointVariable(t *testing.T) {
	t.Setenv("DYNAMODB_ENDPOINT", "http://127.0.0.1:9")
	const notice = `"msg":"dev: DYNAMODB_ENDPOINT is not used: --emulator starts an engine of its own"`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stderr := &cancelOn{line: notice, cancel: cancel}
	// Stopped as soon as it says so, as by Ctrl-C while it starts.
	code := run(ctx, []string{"dev", "--emulator", "moto", "--addr", testutil.FreeAddr(t), "--table-prefix", fmt.Sprintf("evar%d-", time.Now().UnixNano())}, io.Discard, stderr)
	if code != 0 || !strings.Contains(stderr.String(), notice) || !strings.Contains(stderr.String(), `"endpoint":"http://127.0.0.1:9"`) {
		t.Errorf("dev --emulator moto with DYNAMODB_ENDPOINT set: exit %d, stderr:\n%s\nwant exit 0 and %s naming the variable's endpoint", code, stderr.String(), notice)
	}
	var out strings.Builder
	if code := run(context.Background(), []string{"dev", "-h"}, &out, io.Discard); code != 0 ||
		!strings.Contains(strings.Join(strings.Fields(out.String()), " "), "DYNAMODB_ENDPOINT, when set and --emulator is not given, stands for --dynamodb-endpoint") {
		t.Errorf("dev -h does not say --emulator wins over DYNAMODB_ENDPOINT:\n%s", out.String())
	}
}
