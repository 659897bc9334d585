package main

import (
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestMain deselects the README's by-hand TestTryLocally when no
// DYNAMODB_ENDPOINT is given (it would only skip): in the repository the
// same function runs on every test emulator through TestTryLocallyOnEmulators.
func TestMain(m *testing.M) {
	testutil.DeselectByHand("TestTryLocally")
	dynamotest.Main(m)
}

// The repository runs the README's TestTryLocally on its own emulators
// (every engine), with the table created from template.yaml; under
// CI=true a missing emulator fails the test.
func TestTryLocallyOnEmulators(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		setLocalEnv(t, e)
		TestTryLocally(t)
	})
}

func setLocalEnv(t *testing.T, e *dynamotest.Emulator) {
	t.Setenv("DYNAMODB_ENDPOINT", e.Endpoint)
	t.Setenv("IDEMPOTENCY_TABLE", e.CreateTable(t, "IdempotencyTable"))
	t.Setenv("AWS_REGION", "us-east-1")
	// The test emulators' credentials: DynamoDB Local (unlike idemkit dev's,
	// which shares one database) keeps one database per access key.
	t.Setenv("AWS_ACCESS_KEY_ID", "idemkit")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "idemkit")
}
