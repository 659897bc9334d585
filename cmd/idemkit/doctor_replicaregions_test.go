package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// regionTable is what one region's DynamoDB answers about the table in
// regionalAnswers: its replica's deletion protection and point-in-time
// recovery, or a refusal of every call.
type regionTable struct {
	protected, pitr bool
	denied          bool
}

// regionalAnswers is a DynamoDB endpoint answering, per region (the SigV4
// credential scope of the request, as each region's endpoint is its own),
// the idempotency table name as the template gives it, a global table with
// replicas in every region of regions (ACTIVE), each replica with its own
// deletion protection and point-in-time recovery, as DynamoDB keeps them
// per replica. It counts the calls per region.
func regionalAnswers(t *testing.T, name string, regions map[string]regionTable) (string, func() map[string]int) {
	t.Helper()
	scope := regexp.MustCompile(`Credential=[^/]+/[0-9]+/([a-z0-9-]+)/dynamodb/`)
	var mu sync.Mutex
	calls := map[string]int{}
	var reps []string
	for region := range regions {
		reps = append(reps, `{"RegionName":"`+region+`","ReplicaStatus":"ACTIVE"}`)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		m := scope.FindStringSubmatch(r.Header.Get("Authorization"))
		region := ""
		if m != nil {
			region = m[1]
		}
		mu.Lock()
		calls[region]++
		mu.Unlock()
		rr, ok := regions[region]
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
		var in struct{ TableName string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		arn := regexp.MustCompile(`^arn:aws:dynamodb:([a-z0-9-]+):123456789012:table/(.+)$`).FindStringSubmatch(in.TableName)
		switch {
		case arn != nil && arn[1] != region:
			// DynamoDB refuses a table ARN of another region than the
			// endpoint's.
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"__type":"com.amazon.coral.validate#ValidationException","Message":"The ARN region does not match the request region"}`))
		case arn == nil && in.TableName != name || arn != nil && arn[2] != name:
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","Message":"Requested resource not found"}`))
		case !ok:
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","Message":"Requested resource not found"}`))
		case rr.denied:
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"__type":"com.amazon.coral.service#AccessDeniedException","Message":"User: arn:aws:iam::123456789012:user/ops is not authorized to perform: dynamodb:` + op + ` on resource: arn:aws:dynamodb:` + region + `:123456789012:table/` + name + `"}`))
		case op == "DescribeTable":
			_, _ = w.Write([]byte(`{"Table":{"TableName":"` + name + `","TableStatus":"ACTIVE",` +
				`"TableArn":"arn:aws:dynamodb:` + region + `:123456789012:table/` + name + `","GlobalTableVersion":"2019.11.21",` +
				`"DeletionProtectionEnabled":` + map[bool]string{true: "true", false: "false"}[rr.protected] + `,` +
				`"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],` +
				`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],` +
				`"StreamSpecification":{"StreamEnabled":true,"StreamViewType":"NEW_AND_OLD_IMAGES"},` +
				`"Replicas":[` + strings.Join(reps, ",") + `]}}`))
		case op == "DescribeTimeToLive":
			_, _ = w.Write([]byte(`{"TimeToLiveDescription":{"AttributeName":"expiresAt","TimeToLiveStatus":"ENABLED"}}`))
		case op == "DescribeContinuousBackups":
			_, _ = w.Write([]byte(`{"ContinuousBackupsDescription":{"ContinuousBackupsStatus":"ENABLED","PointInTimeRecoveryDescription":{"PointInTimeRecoveryStatus":"` +
				map[bool]string{true: "ENABLED", false: "DISABLED"}[rr.pitr] + `"}}}`))
		default:
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"__type":"com.amazon.coral.validate#ValidationException","Message":"not here"}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range calls {
			out[k] = v
		}
		clear(calls)
		return out
	}
}

// RED_TEAM 516: doctor checks each ACTIVE replica of a global table in
// its own region, for what DynamoDB keeps per replica and the template
// gives every replica: point-in-time recovery and deletion protection (a
// replica added with update-table --replica-updates has neither). TTL,
// stream, keys and indexes are one setting of the whole global table,
// checked in the region described. Each difference is named with its
// replica's region, with the command for that region; a replica region
// whose calls are refused makes the table "error", the refusal on stderr
// naming the region. Before, the replicas were only checked to be listed
// and ACTIVE from the region described: the unprotected replica without
// point-in-time recovery was ok. Two calls per replica region
// (DescribeTable, DescribeContinuousBackups), none for a replica not
// ACTIVE or a single-region table. On AWS (the SDK's
// AWS_ENDPOINT_URL_DYNAMODB naming the answers here).
func TestDoctorChecksEachReplicaInItsRegion(t *testing.T) {
	fakeAWSCredentials(t)
	t.Setenv("AWS_REGION", "us-east-1")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	multi := []string{"--parameter", "CrossRegion=reconciled-records", "--parameter", "ReplicaRegions=eu-west-1,eu-central-1"}
	doctor := func(regions map[string]regionTable, args ...string) (int, string, string, map[string]int) {
		t.Helper()
		ep, calls := regionalAnswers(t, "orders-idem", regions)
		t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", ep)
		var out, errb bytes.Buffer
		if !slices.Contains(args, "--table") {
			args = append([]string{"--table", "idempotency=orders-idem"}, args...)
		}
		code := run(ctx, append([]string{"doctor", "--only", "idempotency"}, args...), &out, &errb)
		return code, out.String(), errb.String(), calls()
	}
	good := regionTable{protected: true, pitr: true}

	code, out, errs, calls := doctor(map[string]regionTable{"us-east-1": good, "eu-west-1": {}, "eu-central-1": good}, multi...)
	want := "IdempotencyTable\torders-idem\tdiffers\n" +
		"  - replica eu-west-1: deletion protection: disabled (template: enabled; one delete-table call removes the table and every record in it); turn it on: aws dynamodb update-table --table-name orders-idem --region eu-west-1 --deletion-protection-enabled\n" +
		"  - replica eu-west-1: point-in-time recovery: disabled (template: enabled); turn it on: aws dynamodb update-continuous-backups --table-name orders-idem --region eu-west-1 --point-in-time-recovery-specification PointInTimeRecoveryEnabled=true\n"
	if code != 1 || out != want {
		t.Errorf("a replica without deletion protection and point-in-time recovery: exit %d, stdout\n%s\nwant 1 and\n%s\nstderr %s", code, out, want, errs)
	}
	if calls["eu-west-1"] != 2 || calls["eu-central-1"] != 2 || calls["us-east-1"] != 3 {
		t.Errorf("calls per region %v, want 3 in the region described and 2 in each replica region", calls)
	}

	// The table named by its ARN (the home region's): each replica is
	// described by its own region's ARN, as DynamoDB refuses another's.
	code, out, errs, _ = doctor(map[string]regionTable{"us-east-1": good, "eu-west-1": {}, "eu-central-1": good},
		append([]string{"--table", "idempotency=arn:aws:dynamodb:us-east-1:123456789012:table/orders-idem"}, multi...)...)
	if code != 1 || !strings.Contains(out, "  - replica eu-west-1: deletion protection: disabled") ||
		!strings.Contains(out, "  - replica eu-west-1: point-in-time recovery: disabled") || strings.Contains(out, "eu-central-1") || errs != "" {
		t.Errorf("the table named by its ARN: exit %d, want 1 with eu-west-1's two differences only\n%s%s", code, out, errs)
	}

	code, out, errs, _ = doctor(map[string]regionTable{"us-east-1": good, "eu-west-1": good, "eu-central-1": {denied: true}}, multi...)
	if code != 1 || out != "IdempotencyTable\torders-idem\terror\n" ||
		!strings.Contains(errs, "replica eu-central-1") || !strings.Contains(errs, "dynamodb:DescribeTable") {
		t.Errorf("a replica region refusing the calls: exit %d, want 1, error, and stderr naming the region and the permission\n%s%s", code, out, errs)
	}

	code, out, errs, _ = doctor(map[string]regionTable{"us-east-1": good, "eu-west-1": good, "eu-central-1": good}, multi...)
	if code != 0 || out != "IdempotencyTable\torders-idem\tok\n" || errs != "" {
		t.Errorf("every replica as the template gives it: exit %d, want 0 and ok\n%s%s", code, out, errs)
	}

	// A single-region read of the same table: its replicas are not
	// checked (stderr says so, as before), and no replica region is called.
	code, out, errs, calls = doctor(map[string]regionTable{"us-east-1": good, "eu-west-1": {}, "eu-central-1": {}})
	if code != 0 || out != "IdempotencyTable\torders-idem\tok\n" || !strings.Contains(errs, "not checked: the replicas of IdempotencyTable") ||
		calls["eu-west-1"]+calls["eu-central-1"] != 0 {
		t.Errorf("single-region read: exit %d, calls %v\n%s%s", code, calls, out, errs)
	}
}
