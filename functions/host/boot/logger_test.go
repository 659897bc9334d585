package boot

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// TestLoggerAddsTheLambdaRequestID: a line logged with an invocation's
// context carries its Lambda request id, one logged without does not, and
// a logger derived With attributes keeps doing so.
func TestLoggerAddsTheLambdaRequestID(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf).With("fn", "api")
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "8f5f-req"})
	log.InfoContext(ctx, "in an invocation")
	log.Info("at start-up")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	var in, out map[string]any
	if json.Unmarshal([]byte(lines[0]), &in) != nil || json.Unmarshal([]byte(lines[1]), &out) != nil {
		t.Fatalf("not JSON lines:\n%s", buf.String())
	}
	if in[AttrLambdaRequestID] != "8f5f-req" || in["fn"] != "api" {
		t.Errorf("invocation line: %s", lines[0])
	}
	if _, ok := out[AttrLambdaRequestID]; ok {
		t.Errorf("start-up line carries a request id: %s", lines[1])
	}
}
