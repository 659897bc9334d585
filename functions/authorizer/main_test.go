package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/idemkit/idemkit/functions/authorizer/authfn"

	"github.com/idemkit/idemkit/functions/host/settings"
)

// TestAuthorizerReadsTheSettingsVariables: the two variables the authorizer
// reads without the settings table are the table's own names.
func TestAuthorizerReadsTheSettingsVariables(t *testing.T) {
	if envAPIKeysTable != settings.EnvAPIKeysTable || envDynamoDBEndpoint != settings.EnvDynamoDBEndpoint {
		t.Fatalf("authorizer reads %s and %s; the settings table names %s and %s",
			envAPIKeysTable, envDynamoDBEndpoint, settings.EnvAPIKeysTable, settings.EnvDynamoDBEndpoint)
	}
	found := false
	for _, s := range settings.Settings {
		found = found || s.Name == envMetricsNamespace
	}
	if !found {
		t.Fatalf("authorizer reads %s, which the settings table does not name", envMetricsNamespace)
	}
}

// TestAuthorizerWritesUnderTheConfiguredNamespace: the authorizer counts
// its refusals under METRICS_NAMESPACE, which the stack sets to its own
// namespace (the one its authorizer-errors alarm subtracts the refusals
// of), and under the default idemkit when it is unset. Before, the
// namespace was fixed at idemkit, so two stacks' authorizers wrote one
// series and each stack's alarm subtracted the other's refusals
// (RED_TEAM 253).
func TestAuthorizerWritesUnderTheConfiguredNamespace(t *testing.T) {
	for _, c := range []struct{ env, want string }{{"idemkit/prod", "idemkit/prod"}, {"", metricsNamespace}} {
		var out bytes.Buffer
		metrics(&out, func(name string) string {
			if name == "METRICS_NAMESPACE" {
				return c.env
			}
			return ""
		}).Count(authfn.MetricRefusals, 1, nil)
		var line struct {
			AWS struct {
				CloudWatchMetrics []struct{ Namespace string }
			} `json:"_aws"`
		}
		if err := json.Unmarshal(out.Bytes(), &line); err != nil || len(line.AWS.CloudWatchMetrics) != 1 {
			t.Fatalf("METRICS_NAMESPACE=%q: not one EMF line: %q (%v)", c.env, out.String(), err)
		}
		if got := line.AWS.CloudWatchMetrics[0].Namespace; got != c.want {
			t.Errorf("METRICS_NAMESPACE=%q: refusals counted under %q, want %q", c.env, got, c.want)
		}
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
