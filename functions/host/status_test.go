package host_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host"
)

// Run statuses are the OpenWOP v2 vocabulary; a RunsTable item written by an
// earlier version with status "succeeded" decodes as completed, and is
// terminal, so it is served, streamed and refused a cancel like any
// completed run (end to end: cmd/idemkit TestDevWireSchemas).
func TestLegacySucceededReadsAsCompleted(t *testing.T) {
	if host.StatusCompleted != "completed" || host.ParseStatus("succeeded") != host.StatusCompleted {
		t.Fatalf("completed status: %q / %q", host.StatusCompleted, host.ParseStatus("succeeded"))
	}
	for _, s := range []string{"pending", "running", "completed", "failed", "cancelled"} {
		if host.ParseStatus(s) != host.Status(s) {
			t.Errorf("ParseStatus(%q) = %q", s, host.ParseStatus(s))
		}
	}
	r, ok := host.RunFromItem(map[string]types.AttributeValue{
		"pk":     &types.AttributeValueMemberS{Value: "acme/0123456789abcdefgh"},
		"tenant": &types.AttributeValueMemberS{Value: "acme"},
		"status": &types.AttributeValueMemberS{Value: "succeeded"},
	})
	if !ok || r.Status != host.StatusCompleted || !r.Status.Terminal() {
		t.Fatalf("legacy item decoded as %+v", r)
	}
}
