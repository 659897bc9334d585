package runs_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/idemkit/idemkit/functions/host/runs"
)

// Run statuses are the OpenWOP v2 vocabulary; a RunsTable item written by an
// earlier version with status "succeeded" decodes as completed, and is
// terminal, so it is served, streamed and refused a cancel like any
// completed run (end to end: cmd/idemkit TestDevWireSchemas).
func TestLegacySucceededReadsAsCompleted(t *testing.T) {
	if runs.StatusCompleted != "completed" || runs.ParseStatus("succeeded") != runs.StatusCompleted {
		t.Fatalf("completed status: %q / %q", runs.StatusCompleted, runs.ParseStatus("succeeded"))
	}
	for _, s := range []string{"pending", "running", "completed", "failed", "cancelled"} {
		if runs.ParseStatus(s) != runs.Status(s) {
			t.Errorf("ParseStatus(%q) = %q", s, runs.ParseStatus(s))
		}
	}
	r, ok := runs.RunFromItem(map[string]types.AttributeValue{
		"pk":     &types.AttributeValueMemberS{Value: "acme/0123456789abcdefgh"},
		"tenant": &types.AttributeValueMemberS{Value: "acme"},
		"status": &types.AttributeValueMemberS{Value: "succeeded"},
	})
	if !ok || r.Status != runs.StatusCompleted || !r.Status.Terminal() {
		t.Fatalf("legacy item decoded as %+v", r)
	}
}
