package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// RED_TEAM 486: doctor checks a global table's replicas in the stack's
// ReplicaRegions. On moto (no engine hosts a replica: DescribeTable lists
// none) a table created from the template is reported to differ, each
// region missing with the command that creates its replica, exit 1, when
// read as the multi-region stack; as a single-region stack's it is ok.
// Before the fix it was ok both ways.
func TestDoctorReportsMissingReplicas(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	name := e.CreateTable(t, "IdempotencyTable")
	doctor := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"doctor", "--endpoint", e.Endpoint, "--region", e.Region, "--only", "idempotency", "--table", "idempotency=" + name}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errs := doctor("--parameter", "CrossRegion=reconciled-records", "--parameter", "ReplicaRegions=eu-west-1,eu-central-1")
	want := "IdempotencyTable\t" + name + "\tdiffers\n" +
		"  - replica eu-west-1: missing (template: a replica in eu-west-1; the functions there find no table); create it: aws dynamodb update-table --table-name " + name + " --region us-east-1 --replica-updates '[{\"Create\":{\"RegionName\":\"eu-west-1\"}}]'\n" +
		"  - replica eu-central-1: missing (template: a replica in eu-central-1; the functions there find no table); create it: aws dynamodb update-table --table-name " + name + " --region us-east-1 --replica-updates '[{\"Create\":{\"RegionName\":\"eu-central-1\"}}]'\n"
	if code != 1 || out != want {
		t.Fatalf("multi-region stack: exit %d, stdout\n%s\nwant exit 1 and\n%s\nstderr %s", code, out, want, errs)
	}
	if code, out, errs := doctor(); code != 0 || out != "IdempotencyTable\t"+name+"\tok\n" {
		t.Fatalf("single-region stack: exit %d, want 0 and ok\n%s%s", code, out, errs)
	}
	// The effects table is replicated under ReplicaRegions alone.
	effects := e.CreateTable(t, "EffectsTable")
	var o, eb bytes.Buffer
	code = run(ctx, []string{"doctor", "--endpoint", e.Endpoint, "--region", e.Region, "--only", "effects", "--table", "effects=" + effects, "--parameter", "ReplicaRegions=eu-west-1"}, &o, &eb)
	if code != 1 || !strings.Contains(o.String(), "  - replica eu-west-1: missing") {
		t.Fatalf("effects table, ReplicaRegions=eu-west-1: exit %d, want 1 with eu-west-1 missing\n%s%s", code, o.String(), eb.String())
	}
}

// replicaAnswer is a DynamoDB endpoint whose idempotency table, named name
// in region, is as the template gives it, with replicas as given (JSON).
func replicaAnswer(t *testing.T, name, region, replicas string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		switch r.Header.Get("X-Amz-Target") {
		case "DynamoDB_20120810.DescribeTable":
			_, _ = w.Write([]byte(`{"Table":{"TableName":"` + name + `","TableStatus":"ACTIVE",` +
				`"TableArn":"arn:aws:dynamodb:` + region + `:123456789012:table/` + name + `","GlobalTableVersion":"2019.11.21",` +
				`"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],` +
				`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],` +
				`"StreamSpecification":{"StreamEnabled":true,"StreamViewType":"NEW_AND_OLD_IMAGES"},` +
				`"Replicas":` + replicas + `}}`))
		case "DynamoDB_20120810.DescribeTimeToLive":
			_, _ = w.Write([]byte(`{"TimeToLiveDescription":{"AttributeName":"expiresAt","TimeToLiveStatus":"ENABLED"}}`))
		case "DynamoDB_20120810.DescribeContinuousBackups":
			_, _ = w.Write([]byte(`{"ContinuousBackupsDescription":{"ContinuousBackupsStatus":"ENABLED","PointInTimeRecoveryDescription":{"PointInTimeRecoveryStatus":"ENABLED"}}}`))
		default:
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"__type":"com.amazon.coral.validate#ValidationException","Message":"not here"}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// RED_TEAM 486, with DescribeTable answers as DynamoDB gives a global
// table's (no engine hosts replicas): a replica not ACTIVE differs, its
// status named; all ACTIVE is ok; a global table checked as a
// single-region stack is ok, and stderr says its replicas were not
// checked.
func TestDoctorReplicaStatus(t *testing.T) {
	fakeAWSCredentials(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	doctor := func(replicas string, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"doctor", "--endpoint", replicaAnswer(t, "orders-idem", "us-east-1", replicas), "--region", "us-east-1", "--only", "idempotency", "--table", "idempotency=orders-idem"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	multi := []string{"--parameter", "CrossRegion=fenced-effects", "--parameter", "ReplicaRegions=eu-west-1,eu-central-1"}
	const active = `[{"RegionName":"us-east-1","ReplicaStatus":"ACTIVE"},{"RegionName":"eu-west-1","ReplicaStatus":"ACTIVE"},{"RegionName":"eu-central-1","ReplicaStatus":"ACTIVE"}]`
	// fenced-effects: no TTL on the idempotency table; this answer has
	// one, so the single-region read is the one that matches the TTL.
	code, out, errs := doctor(`[{"RegionName":"eu-west-1","ReplicaStatus":"ACTIVE"},{"RegionName":"eu-central-1","ReplicaStatus":"INACCESSIBLE_ENCRYPTION_CREDENTIALS","ReplicaStatusDescription":"KMS key disabled"}]`, multi...)
	if code != 1 || !strings.Contains(out, "\tdiffers\n") ||
		!strings.Contains(out, "  - replica eu-central-1: INACCESSIBLE_ENCRYPTION_CREDENTIALS, not ACTIVE (KMS key disabled); the functions there cannot use it until it is ACTIVE\n") ||
		strings.Contains(out, "replica eu-west-1") {
		t.Errorf("one replica not ACTIVE: exit %d, want 1 naming its status\n%s%s", code, out, errs)
	}
	if code, out, errs := doctor(active, "--parameter", "CrossRegion=reconciled-records", "--parameter", "ReplicaRegions=eu-west-1,eu-central-1"); code != 0 || out != "IdempotencyTable\torders-idem\tok\n" || errs != "" {
		t.Errorf("all replicas ACTIVE: exit %d, want 0 and ok\n%s%s", code, out, errs)
	}
	code, out, errs = doctor(active)
	if code != 0 || out != "IdempotencyTable\torders-idem\tok\n" ||
		!strings.Contains(errs, "not checked: the replicas of IdempotencyTable (replicas in eu-west-1, eu-central-1)") ||
		!strings.Contains(errs, "--parameter ReplicaRegions=") {
		t.Errorf("a global table read as a single-region stack: exit %d, want 0, ok, and stderr saying its replicas were not checked\n%s%s", code, out, errs)
	}
	// A table the template makes no global table (the runs table): no
	// replica regions to give, so no such note.
	var o, eb bytes.Buffer
	run(ctx, []string{"doctor", "--endpoint", replicaAnswer(t, "orders-idem", "us-east-1", active), "--region", "us-east-1", "--only", "runs", "--table", "runs=orders-idem"}, &o, &eb)
	if strings.Contains(eb.String(), "not checked: the replicas") {
		t.Errorf("runs table with replicas: stderr %q, want no note of replicas", eb.String())
	}
}

// RED_TEAM 486: docs/DEPLOYING.md's sample of replica differences is what
// doctor prints for a home region's table (eu-west-1) whose replica in
// eu-central-1 is missing and whose one in us-east-1 is being created:
// us-east-1, the region the built-in template is read in, is a replica
// region like any other there.
func TestDoctorReplicaSample(t *testing.T) {
	fakeAWSCredentials(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep := replicaAnswer(t, "orders-idempotency", "eu-west-1", `[{"RegionName":"eu-west-1","ReplicaStatus":"ACTIVE"},{"RegionName":"us-east-1","ReplicaStatus":"CREATING"}]`)
	var out, errb bytes.Buffer
	code := run(ctx, []string{"doctor", "--endpoint", ep, "--table", "IdempotencyTable=orders-idempotency", "--only", "idempotency", "--region", "eu-west-1",
		"--parameter", "CrossRegion=reconciled-records", "--parameter", "ReplicaRegions=eu-central-1,us-east-1"}, &out, &errb)
	shown := testutil.ShownOutput(t, filepath.Join(dynamotest.RepoRoot(), "docs", "DEPLOYING.md"), "TestDoctorReplicaSample/sample")
	if code != 1 || out.String() != shown {
		t.Errorf("exit %d, want 1; doctor printed\n%s\ndocs/DEPLOYING.md shows\n%s\nstderr %s", code, out.String(), shown, errb.String())
	}
}
