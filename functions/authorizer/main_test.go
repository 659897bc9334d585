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

// TestAuthorizerMetricsNamespace: the authorizer counts its refusals under
// the namespace the stack's alarms watch, the METRICS_NAMESPACE default.
func TestAuthorizerMetricsNamespace(t *testing.T) {
	for _, s := range settings.Settings {
		if s.Name == "METRICS_NAMESPACE" && s.Default != metricsNamespace {
			t.Fatalf("authorizer emits under %q; METRICS_NAMESPACE defaults to %q", metricsNamespace, s.Default)
		}
	}
}
