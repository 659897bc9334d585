package main

import (
	"testing"

	"github.com/idemkit/idemkit/functions/host/settings"
)

// TestAuthorizerReadsTheSettingsVariables: the two variables the authorizer
// reads without the settings table are the table's own names.
func TestAuthorizerReadsTheSettingsVariables(t *testing.T) {
	if envAPIKeysTable != settings.EnvAPIKeysTable || envDynamoDBEndpoint != settings.EnvDynamoDBEndpoint {
		t.Fatalf("authorizer reads %s and %s; the settings table names %s and %s",
			envAPIKeysTable, envDynamoDBEndpoint, settings.EnvAPIKeysTable, settings.EnvDynamoDBEndpoint)
	}
}
