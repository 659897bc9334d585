package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
)

// TestDoctorChecksAStackOfOtherParameters: a fenced-effects stack deploys
// its idempotency table without TTL (a TTL delete in another replica would
// remove the home region's record of a reused key; the sweeper deletes
// expired records instead). Read with the template's defaults, doctor
// reports that table "differs" with "TTL: disabled (... expired records are
// never deleted)", both wrong there and an invitation to turn TTL on, which
// that posture forbids. With --parameter CrossRegion=fenced-effects doctor
// reads the template as that stack was deployed: the table matches, and a
// table that has TTL is the one that differs. Before the fix doctor had no
// --parameter flag (exit 2).
func TestDoctorChecksAStackOfOtherParameters(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	defs, err := tables.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	fenced := defs["IdempotencyTable"]
	fenced.TTLAttribute = "" // as CrossRegion=fenced-effects deploys it
	name := "doctor-fenced-IdempotencyTable"
	if _, err := tables.CreateDef(ctx, e.Client(), fenced, name); err != nil {
		t.Fatal(err)
	}
	withTTL := e.CreateTable(t, "IdempotencyTable") // as the defaults deploy it
	doctor := func(table string, args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"doctor", "--endpoint", e.Endpoint, "--region", e.Region, "--only", "idempotency", "--table", "idempotency=" + table}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, s := doctor(name); code != 1 || !strings.Contains(s, "TTL: disabled") || !strings.Contains(s, "--parameter CrossRegion=fenced-effects") {
		t.Fatalf("fenced table against the defaults: exit %d, want 1 with TTL: disabled and how to give the stack's parameters\n%s", code, s)
	}
	if code, s := doctor(name, "--parameter", "CrossRegion=fenced-effects"); code != 0 || !strings.Contains(s, "IdempotencyTable\t"+name+"\tok\n") {
		t.Fatalf("fenced table against CrossRegion=fenced-effects: exit %d, want 0 and ok\n%s", code, s)
	}
	if code, s := doctor(withTTL, "--parameter", "CrossRegion=fenced-effects"); code != 1 || !strings.Contains(s, "TTL: template none, deployed expiresAt") {
		t.Fatalf("a table with TTL against CrossRegion=fenced-effects: exit %d, want 1 naming the TTL\n%s", code, s)
	}
	if code, s := doctor(withTTL, "--parameter", "CrossRegion=single-region"); code != 0 {
		t.Fatalf("a table with TTL against CrossRegion=single-region: exit %d, want 0\n%s", code, s)
	}
	// Another template (a snippet has no CrossRegion): no word of the
	// built-in template's parameters.
	snippet := filepath.Join(dynamotest.RepoRoot(), "docs", "idempotency-table.yaml")
	if code, s := doctor(name, "--template", snippet); code != 1 || strings.Contains(s, "--parameter") {
		t.Fatalf("against the snippet: exit %d, want 1 without the parameters note\n%s", code, s)
	}
}

// TestDoctorParameterUsageErrors: a --parameter the template does not
// declare, a value outside its AllowedValues (a typo would otherwise read
// as another posture) or one without "=" is a usage error.
func TestDoctorParameterUsageErrors(t *testing.T) {
	for arg, want := range map[string]string{
		"Posture=fenced-effects": `--parameter "Posture=fenced-effects": the template has no parameter Posture`,
		"CrossRegion=fenced":     `--parameter "CrossRegion=fenced": want one of single-region, reconciled-records, fenced-effects`,
		"CrossRegion":            "want NAME=VALUE",
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"doctor", "--endpoint", "http://127.0.0.1:1", "--parameter", arg}, &out, &errb)
		if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), want) || strings.Count(errb.String(), "\n") != 2 {
			t.Errorf("--parameter %s: exit %d, stdout %q, stderr %q; want 2 and %q", arg, code, out.String(), errb.String(), want)
		}
	}
}

// TestDoctorParameterConstraintsAsCloudFormation: a --parameter value the
// template's constraints refuse is refused as CloudFormation would refuse
// it at deploy time, a usage error naming it: a Number outside MinValue ..
// MaxValue, or no number at all; a String that AllowedPattern does not
// match as a whole (with its ConstraintDescription). A value at a bound is accepted (the run then fails on
// the unreachable endpoint, exit 1).
func TestDoctorParameterConstraintsAsCloudFormation(t *testing.T) {
	// The parameters the functions read as whole numbers are Strings whose
	// pattern is the range they take (RED_TEAM 401): "300.0", which a
	// Number took and the functions refused at every cold start, is refused.
	// A want of two parts (…) needs both.
	for arg, want := range map[string]string{
		"LeaseSeconds=29":          `--parameter "LeaseSeconds=29": want a value matching …(must be whole seconds from 30 to 3600, digits only.)`,
		"LeaseSeconds=3601":        `--parameter "LeaseSeconds=3601": want a value matching …(must be whole seconds from 30 to 3600, digits only.)`,
		"LeaseSeconds=300s":        `--parameter "LeaseSeconds=300s": want a value matching …(must be whole seconds from 30 to 3600, digits only.)`,
		"LeaseSeconds=":            `--parameter "LeaseSeconds=": want a value matching …(must be whole seconds from 30 to 3600, digits only.)`,
		"LeaseSeconds=300.0":       `--parameter "LeaseSeconds=300.0": want a value matching …(must be whole seconds from 30 to 3600, digits only.)`,
		"EffectRetentionDays=7":    `--parameter "EffectRetentionDays=7": want a value matching …(must be whole days from 14 to 106751 (about 292 years), digits only.)`,
		"StreamMaxRetries=-1":      `--parameter "StreamMaxRetries=-1": want a value matching …(must be a whole number from 0 to 100, digits only.)`,
		"ApiThrottleRateLimit=NaN": `--parameter "ApiThrottleRateLimit=NaN": want a number of at least 1`,
		"RunRetentionDays=7d":      `--parameter "RunRetentionDays=7d": want a value matching …(must be empty, 0, or whole days from 14 to 106751 (about 292 years), digits only.)`,
		"RetentionHours=24h":       `--parameter "RetentionHours=24h": want a value matching …(must be empty, forever, or whole hours from 0 to 2562047 (about 292 years), digits only.)`,
		"LogRetentionDays=2":       `--parameter "LogRetentionDays=2": want one of 1, 3, 5,`,
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"doctor", "--endpoint", "http://127.0.0.1:1", "--parameter", arg}, &out, &errb)
		contains := true
		for _, w := range strings.Split(want, "…") {
			contains = contains && strings.Contains(errb.String(), w)
		}
		if code != 2 || out.Len() != 0 || !contains || strings.Count(errb.String(), "\n") != 2 {
			t.Errorf("--parameter %s: exit %d, stdout %q, stderr %q; want 2 and %q", arg, code, out.String(), errb.String(), want)
		}
	}
	for _, arg := range []string{"LeaseSeconds=30", "LeaseSeconds=3600", "EffectRetentionDays=14", "RunRetentionDays=", "RunRetentionDays=30", "RetentionHours=forever", "LogRetentionDays=14"} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"doctor", "--endpoint", "http://127.0.0.1:1", "--only", "idempotency", "--parameter", arg}, &out, &errb)
		if code != 1 || strings.Contains(errb.String(), "--parameter") {
			t.Errorf("--parameter %s: exit %d, stderr %q; want it accepted (exit 1 on the unreachable endpoint)", arg, code, errb.String())
		}
	}
}
