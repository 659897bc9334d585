package settings

import (
	"errors"
	"strings"
	"testing"
)

func TestLoadEnvFenceTableRegion(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
		err  string
	}{
		{env: map[string]string{}, want: ""},
		{env: map[string]string{EnvFenceTableRegion: " eu-west-1 "}, want: "eu-west-1"},
		{env: map[string]string{EnvCrossRegion: CrossRegionFenced, EnvFenceTable: "fence", EnvFenceTableRegion: "us-gov-west-1"}, want: "us-gov-west-1"},
		{env: map[string]string{EnvFenceTableRegion: "Europe"}, err: EnvFenceTableRegion},
		{env: map[string]string{EnvFenceTableRegion: "eu-west-1,us-east-1"}, err: EnvFenceTableRegion},
		{env: map[string]string{EnvCrossRegion: CrossRegionFenced, EnvFenceTableRegion: "eu-west-1"}, err: EnvFenceTable},
	} {
		e, err := LoadEnv(func(k string) string { return tc.env[k] })
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("%v: err %v, want one naming %s", tc.env, err, tc.err)
			}
			continue
		}
		if err != nil || e.FenceTableRegion != tc.want {
			t.Fatalf("%v: %q, %v; want %q", tc.env, e.FenceTableRegion, err, tc.want)
		}
	}
}

// IDEMPOTENCY_TABLE_REGION pins Layer 1 to the home region under
// fenced-effects only; a fenced deployment is home-pinned even without it
// (it defaults to FENCE_TABLE_REGION), and it cannot name a second "home".
func TestLoadEnvIdempotencyTableRegion(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
		err  string
	}{
		{env: map[string]string{}, want: ""},
		{env: map[string]string{EnvCrossRegion: CrossRegionReconciled}, want: ""},
		{env: fenced(), err: EnvFenceTableRegion}, // the home region is named, the home stack's own too (RED_TEAM 509)
		{env: fenced(EnvFenceTableRegion, "eu-west-1", EnvIdempotencyTableRegion, " eu-west-1 "), want: "eu-west-1"},
		{env: fenced(EnvFenceTableRegion, "eu-west-1"), want: "eu-west-1"},
		{env: fenced(EnvFenceTableRegion, "eu-west-1", EnvIdempotencyTableRegion, "eu-west-1"), want: "eu-west-1"},
		{env: fenced(EnvFenceTableRegion, "eu-west-1", EnvIdempotencyTableRegion, "us-east-1"), err: "ONE home region"},
		{env: fenced(EnvFenceTableRegion, "eu-west-1", EnvIdempotencyTableRegion, "Europe"), err: EnvIdempotencyTableRegion},
		{env: map[string]string{EnvCrossRegion: CrossRegionReconciled, EnvIdempotencyTableRegion: "eu-west-1"}, err: EnvIdempotencyTableRegion},
		{env: map[string]string{EnvIdempotencyTableRegion: "eu-west-1"}, err: EnvIdempotencyTableRegion},
	} {
		checkRegion(t, tc.env, tc.want, tc.err, func(e Env) string { return e.IdempotencyTableRegion })
	}
}

// RUNS_TABLE_REGION: set only under fenced-effects, an AWS region, the one
// home region; unset is the local table (no default: only a fenced replica
// stack's api sets it, kit.NewKit refuses such an api without it).
func TestLoadEnvRunsTableRegion(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
		err  string
	}{
		{env: map[string]string{}, want: ""},
		{env: fenced(EnvFenceTableRegion, "eu-west-1"), want: ""},
		{env: fenced(EnvFenceTableRegion, "eu-west-1", EnvRunsTableRegion, " eu-west-1 "), want: "eu-west-1"},
		{env: fenced(EnvFenceTableRegion, "eu-west-1", EnvRunsTableRegion, "us-east-1"), err: "ONE home region"},
		{env: fenced(EnvRunsTableRegion, "Europe"), err: EnvRunsTableRegion},
		{env: fenced(EnvIdempotencyTableRegion, "eu-west-1", EnvRunsTableRegion, "us-east-1"), err: "ONE home region"},
		{env: map[string]string{EnvCrossRegion: CrossRegionReconciled, EnvRunsTableRegion: "eu-west-1"}, err: EnvRunsTableRegion},
		{env: map[string]string{EnvRunsTableRegion: "eu-west-1"}, err: EnvRunsTableRegion},
	} {
		checkRegion(t, tc.env, tc.want, tc.err, func(e Env) string { return e.RunsTableRegion })
	}
}

// fenced is a fenced-effects environment with kv (name, value pairs) added.
func fenced(kv ...string) map[string]string {
	m := map[string]string{EnvCrossRegion: CrossRegionFenced, EnvFenceTable: "fence"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// checkRegion loads env and checks the region setting field reads: want,
// or an error naming wantErr.
func checkRegion(t *testing.T, env map[string]string, want, wantErr string, field func(Env) string) {
	t.Helper()
	e, err := LoadEnv(func(k string) string { return env[k] })
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("%v: err %v, want one naming %s", env, err, wantErr)
		}
		return
	}
	if err != nil || field(e) != want {
		t.Fatalf("%v: %q, %v; want %q", env, field(e), err, want)
	}
}

// TestFencedEffectsNeedsFenceTableRegion: under fenced-effects a function
// started without FENCE_TABLE_REGION is refused, the error naming the
// variable (RED_TEAM 509), as one without FENCE_TABLE is. Before, it took
// its own region for the home: a stack deployed by hand without it was a
// second home, fencing each effect once per region.
func TestFencedEffectsNeedsFenceTableRegion(t *testing.T) {
	_, err := LoadEnv(func(k string) string { return fenced()[k] })
	if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "CROSS_REGION=fenced-effects needs FENCE_TABLE_REGION") {
		t.Fatalf("fenced-effects without FENCE_TABLE_REGION: err %v, want a configuration error naming FENCE_TABLE_REGION", err)
	}
	if _, err := LoadEnv(func(k string) string { return fenced(EnvFenceTableRegion, "eu-west-1")[k] }); err != nil {
		t.Fatalf("fenced-effects with FENCE_TABLE_REGION: %v", err)
	}
	// Other postures do not need it.
	for _, cross := range []string{CrossRegionSingle, CrossRegionReconciled} {
		if _, err := LoadEnv(func(k string) string { return map[string]string{EnvCrossRegion: cross}[k] }); err != nil {
			t.Fatalf("%s without FENCE_TABLE_REGION: %v", cross, err)
		}
	}
}

// HOME_FENCE_TABLE_ARN (a replica-region stack's api and executor: the
// home stack's fence table, whose tag of the home's CrossRegion is read at
// start-up, RED_TEAM 537) is a DynamoDB table's ARN naming FENCE_TABLE in
// FENCE_TABLE_REGION.
func TestLoadEnvHomeFenceTableARN(t *testing.T) {
	const arn = "arn:aws:dynamodb:eu-west-1:123456789012:table/home-FenceTable-1"
	replica := func(kv ...string) map[string]string {
		m := map[string]string{EnvCrossRegion: CrossRegionReconciled, EnvFenceTable: "home-FenceTable-1", EnvFenceTableRegion: "eu-west-1"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
		err  string
	}{
		{env: map[string]string{}, want: ""},
		{env: replica(EnvHomeFenceTableARN, arn), want: arn},
		{env: replica(EnvHomeFenceTableARN, "arn:aws-us-gov:dynamodb:us-gov-west-1:123456789012:table/f.x_y-z", EnvFenceTable, "f.x_y-z", EnvFenceTableRegion, "us-gov-west-1"), want: "arn:aws-us-gov:dynamodb:us-gov-west-1:123456789012:table/f.x_y-z"},
		{env: replica(EnvHomeFenceTableARN, "home-FenceTable-1"), err: EnvHomeFenceTableARN},
		{env: replica(EnvHomeFenceTableARN, "arn:aws:dynamodb:eu-west-1:123456789012:table/*"), err: EnvHomeFenceTableARN},
		{env: replica(EnvHomeFenceTableARN, "arn:aws:s3:eu-west-1:123456789012:table/home-FenceTable-1"), err: EnvHomeFenceTableARN},
		{env: replica(EnvHomeFenceTableARN, "arn:aws:dynamodb:us-east-1:123456789012:table/home-FenceTable-1"), err: EnvFenceTableRegion},
		{env: replica(EnvHomeFenceTableARN, "arn:aws:dynamodb:eu-west-1:123456789012:table/other"), err: EnvFenceTable},
	} {
		checkRegion(t, tc.env, tc.want, tc.err, func(e Env) string { return e.HomeFenceTableARN })
	}
}
