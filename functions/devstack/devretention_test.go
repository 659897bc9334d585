package devstack_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/devstack"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDevHonoursRunRetention: `idemkit dev` reads RUN_RETENTION_DAYS as the
// functions do. A run it executes to completion is left with expiresAt =
// its end + the retention in RunsTable (created with its TTL on
// expiresAt), and a value below EFFECT_RETENTION_DAYS stops it before
// anything is started, naming both settings.
func TestDevHonoursRunRetention(t *testing.T) {
	_, err := devstack.Start(context.Background(), devstack.Options{Endpoint: "http://127.0.0.1:9", Addr: testutil.FreeAddr(t),
		Settings: map[string]string{settings.EnvRunRetention: "7"}})
	if !errors.Is(err, settings.ErrConfig) || !strings.Contains(err.Error(), "RUN_RETENTION_DAYS=7 is below EFFECT_RETENTION_DAYS=14") {
		t.Fatalf("Start with RUN_RETENTION_DAYS=7: %v, want refused naming both settings", err)
	}

	e := dynamotest.Start(t, dynamotest.Moto)
	key := "idk_retention_test_0123456789"
	s, err := devstack.Start(t.Context(), devstack.Options{Endpoint: e.Endpoint, Addr: "127.0.0.1:0",
		TablePrefix: "retention" + strconv.FormatInt(time.Now().UnixNano(), 10) + "-",
		APIKeys:     []string{key + "=acme"}, Settings: map[string]string{settings.EnvRunRetention: "30"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	resp, m := testutil.DoJSON(t, "POST", s.URL()+"/runs", `{"workflowId":"conformance-noop"}`,
		"Authorization", testutil.Bearer(key), "Idempotency-Key", "retention-test-key-0123456789")
	id, _ := m["runId"].(string)
	if resp.StatusCode != 201 || id == "" {
		t.Fatalf("createRun: %d %v", resp.StatusCode, m)
	}
	c := e.Client()
	var item map[string]types.AttributeValue
	for deadline := time.Now().Add(2 * time.Minute); ; {
		out, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(s.Tables()["RunsTable"]), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}}})
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := runs.RunFromItem(out.Item); ok && r.Status.Terminal() {
			item = out.Item
			break
		}
		if _, ok := out.Item["expiresAt"]; ok {
			t.Fatalf("a live run carries expiresAt: %v", out.Item)
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s did not end: %v", id, out.Item)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r, _ := runs.RunFromItem(item)
	exp, ok := item["expiresAt"].(*types.AttributeValueMemberN)
	if want := r.UpdatedAt.Add(30 * 24 * time.Hour).Unix(); r.Status != runs.StatusCompleted || !ok || exp.Value != strconv.FormatInt(want, 10) {
		t.Fatalf("the ended run: %s, expiresAt %v, want completed with %d (its end %v + 30 days)", r.Status, item["expiresAt"], want, r.UpdatedAt)
	}
}
