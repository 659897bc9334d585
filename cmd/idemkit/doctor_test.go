package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDoctorFindsRenamedTableMissingTTLAndStream: on DynamoDB Local and
// moto, `idemkit doctor --endpoint` passes the tables `idemkit tables
// create` made, and fails (exit 1), saying what differs, for a renamed
// table, a table without its TTL and one without its stream.
func TestDoctorFindsRenamedTableMissingTTLAndStream(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c := e.Client()
		var b [4]byte
		_, _ = rand.Read(b[:])
		prefix := "doctor-" + hex.EncodeToString(b[:]) + "-"
		doctor := func(args ...string) (int, string) {
			var out, errb bytes.Buffer
			code := run(ctx, append([]string{"doctor", "--endpoint", e.Endpoint, "--region", e.Region, "--prefix", prefix}, args...), &out, &errb)
			return code, out.String() + errb.String()
		}
		var out, errb bytes.Buffer
		if code := run(ctx, []string{"tables", "create", "--endpoint", e.Endpoint, "--region", e.Region, "--prefix", prefix, "--only", "idempotency,effects"}, &out, &errb); code != 0 {
			t.Fatalf("tables create: %d %s", code, errb.String())
		}
		t.Cleanup(func() {
			for _, id := range []string{"IdempotencyTable", "EffectsTable", "IdempotencyTable-plain", "IdempotencyTable-snippet"} {
				_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(prefix + id)})
			}
		})
		if code, s := doctor("--only", "idempotency,effects"); code != 0 ||
			!strings.Contains(s, "IdempotencyTable\t"+prefix+"IdempotencyTable\tok\n") || !strings.Contains(s, "EffectsTable\t"+prefix+"EffectsTable\tok\n") {
			t.Fatalf("the tables as created: exit %d\n%s", code, s)
		}

		// Renamed: the function is given a name no table has.
		code, s := doctor("--table", "IdempotencyTable="+prefix+"Idempotency")
		if code != 1 || !strings.Contains(s, "IdempotencyTable\t"+prefix+"Idempotency\tmissing\n") {
			t.Fatalf("renamed table: exit %d\n%s", code, s)
		}
		printed := s

		// A table created without TTL and without stream.
		defs, err := tables.Embedded()
		if err != nil {
			t.Fatal(err)
		}
		plain := defs["IdempotencyTable"]
		plain.TTLAttribute, plain.StreamViewType = "", ""
		if _, err := tables.CreateDef(ctx, c, plain, prefix+"IdempotencyTable-plain"); err != nil {
			t.Fatal(err)
		}
		code, s = doctor("--table", "idempotency="+prefix+"IdempotencyTable-plain", "--only", "idempotency")
		if code != 1 || !strings.Contains(s, "\tdiffers\n") ||
			!strings.Contains(s, "  - stream: missing (template NEW_AND_OLD_IMAGES") ||
			!strings.Contains(s, "  - TTL: disabled (template: attribute expiresAt") {
			t.Fatalf("table without TTL and stream: exit %d\n%s", code, s)
		}
		// docs/DEPLOYING.md's sample output shows these cases: each of its
		// difference lines is one doctor printed here (its region aside).
		printed += s
		for _, line := range deployDocDoctorLines(t) {
			if l := strings.ReplaceAll(line, "region eu-west-1", "region "+e.Region); !strings.Contains(printed, l+"\n") {
				t.Errorf("docs/DEPLOYING.md's doctor sample shows %q; doctor printed:\n%s", line, printed)
			}
		}
		// And the sample is what one run prints, in its order: the
		// idempotency table without TTL and stream, the effects table
		// missing, both named as the sample's command names them
		// (RED_TEAM 389: the sample listed the idempotency table first,
		// which no run of doctor does).
		code, s = doctor("--only", "idempotency,effects",
			"--table", "IdempotencyTable="+prefix+"IdempotencyTable-plain", "--table", "EffectsTable="+prefix+"orders-effects")
		shown := testutil.ShownOutput(t, filepath.Join(dynamotest.RepoRoot(), "docs", "DEPLOYING.md"), "TestDoctorFindsRenamedTableMissingTTLAndStream/sample")
		shown = strings.NewReplacer("orders-idempotency", prefix+"IdempotencyTable-plain", "orders-effects", prefix+"orders-effects",
			"region eu-west-1", "region "+e.Region).Replace(shown)
		if err := testutil.MatchShown(shown, s); code != 1 || err != nil {
			t.Errorf("docs/DEPLOYING.md's doctor sample against one run: exit %d, %v", code, err)
		}

		// A table deployed from the snippet docs/DEPLOYING.md shows (no
		// stream) matches that snippet.
		snippet := filepath.Join(dynamotest.RepoRoot(), "docs", "idempotency-table.yaml")
		sb, err := os.ReadFile(snippet)
		if err != nil {
			t.Fatal(err)
		}
		sdefs, err := tables.Defs(sb)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tables.CreateDef(ctx, c, sdefs["IdempotencyTable"], prefix+"IdempotencyTable-snippet"); err != nil {
			t.Fatal(err)
		}
		code, s = doctor("--template", snippet, "--only", "idempotency", "--table", "idempotency="+prefix+"IdempotencyTable-snippet")
		if code != 0 || !strings.Contains(s, "\tok\n") {
			t.Fatalf("table from the snippet, against the snippet: exit %d\n%s", code, s)
		}
	})
}

// TestDoctorTableThatCannotBeDescribed: an endpoint that answers nothing
// gives every named table the status "error" (listed in the help), the
// reason on standard error, once however many tables it kept from being
// checked (before, once per table), then those tables, and exit 1.
func TestDoctorTableThatCannotBeDescribed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"doctor", "--endpoint", endpoint, "--region", "us-east-1"}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "IdempotencyTable\tidemkit-IdempotencyTable\terror\n") || !strings.Contains(errb.String(), "idemkit doctor: ") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", out.String(), errb.String())
	}
	// The engine's one fault is said once, then the tables it kept from
	// being checked are named, not the same line once per table.
	const all = "ApiKeysTable, EffectsTable, FenceTable, IdempotencyTable, RunsTable"
	if n := strings.Count(errb.String(), "cannot reach the engine"); n != 1 || !strings.Contains(errb.String(), "\nidemkit doctor: could not check "+all+"\n") {
		t.Fatalf("stderr says the fault %d times, want once, then the tables (%s):\n%s", n, all, errb.String())
	}
	var help bytes.Buffer
	run(ctx, []string{"doctor", "--help"}, &help, &help)
	if !strings.Contains(help.String(), "ok|differs|missing|error|not checked") {
		t.Fatalf("doctor's help does not list the error status:\n%s", help.String())
	}
}

// TestDoctorChecksHomeRegionTablesThere: given a fenced replica region's
// environment, a table its functions call in the home region
// (RUNS_TABLE_REGION, IDEMPOTENCY_TABLE_REGION, FENCE_TABLE_REGION) is
// checked there, not reported missing from the local region; without the
// home-region variable it is looked for locally, and the message names the
// region searched.
func TestDoctorChecksHomeRegionTablesThere(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	home := e.InRegion("eu-west-1")
	runs := home.CreateTable(t, "RunsTable")
	ctx := context.Background()
	doctor := func() (int, string) {
		var out, errb bytes.Buffer
		code := run(ctx, []string{"doctor", "--endpoint", e.Endpoint, "--only", "runs"}, &out, &errb)
		return code, out.String() + errb.String()
	}
	t.Setenv("RUNS_TABLE", runs)
	t.Setenv("RUNS_TABLE_REGION", "")
	if code, s := doctor(); code != 1 || !strings.Contains(s, "RunsTable\t"+runs+"\tmissing\n") || !strings.Contains(s, "in region "+e.Region) {
		t.Fatalf("without RUNS_TABLE_REGION: exit %d\n%s", code, s)
	}
	t.Setenv("RUNS_TABLE_REGION", "eu-west-1")
	if code, s := doctor(); code != 0 || !strings.Contains(s, "RunsTable\t"+runs+"\tok\n") {
		t.Fatalf("with RUNS_TABLE_REGION: exit %d\n%s", code, s)
	}
}

// TestDoctorWithNothingToCheckIsAUsageError: with no --endpoint, no --table
// and none of the tables' variables, doctor has no table to check: exit 2
// (a usage error, as its help says), with the ways to name one.
func TestDoctorWithNothingToCheckIsAUsageError(t *testing.T) {
	for _, v := range []string{"IDEMPOTENCY_TABLE", "EFFECTS_TABLE", "RUNS_TABLE", "FENCE_TABLE", "API_KEYS_TABLE"} {
		t.Setenv(v, "")
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"doctor"}, &out, &errb)
	if code != 2 || !strings.Contains(errb.String(), "no table to check: give --endpoint, --table LogicalID=NAME or the tables' variables") {
		t.Fatalf("doctor with nothing named: exit %d stderr %q", code, errb.String())
	}
	if out.Reset(); run(context.Background(), []string{"doctor", "-h"}, &out, &bytes.Buffer{}) != 0 || !strings.Contains(out.String(), "2 on a usage error") {
		t.Errorf("doctor -h does not say it exits 2 on a usage error:\n%s", out.String())
	}
}

// deployDocDoctorLines returns the difference lines ("  - ...") of the
// sample `idemkit doctor` output docs/DEPLOYING.md shows.
func deployDocDoctorLines(t *testing.T) []string {
	t.Helper()
	block := testutil.ShownOutput(t, filepath.Join(dynamotest.RepoRoot(), "docs", "DEPLOYING.md"), "TestDoctorFindsRenamedTableMissingTTLAndStream/sample")
	ok := true
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(l, "  - ") {
			lines = append(lines, l)
		}
	}
	if !ok || len(lines) == 0 {
		t.Fatal("docs/DEPLOYING.md's doctor section shows no sample output with differences")
	}
	return lines
}
