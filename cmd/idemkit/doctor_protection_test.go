package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// RED_TEAM 515: `idemkit doctor` on AWS (no --endpoint) compares deletion
// protection, which every table of template.yaml has: a table without it
// differs (exit 1), the line giving the command that turns it on, and the
// same table with it is ok. At an --endpoint (an emulator's or LocalStack's
// tables, which `idemkit tables create` and `idemkit dev` make without it
// so that they can be deleted) it is not compared: the same unprotected
// table is ok there, as before. Before, doctor never read it: the
// unprotected table was ok on AWS too. "AWS" is moto here, reached through
// the SDK's own AWS_ENDPOINT_URL_DYNAMODB, as doctor without --endpoint
// reaches whatever the default configuration names.
func TestDoctorComparesDeletionProtectionOnAWS(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var b [4]byte
	_, _ = rand.Read(b[:])
	prefix := "protect-" + hex.EncodeToString(b[:]) + "-"
	name := prefix + "IdempotencyTable"
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"tables", "create", "--endpoint", e.Endpoint, "--region", e.Region, "--prefix", prefix, "--only", "idempotency"}, &out, &errb); code != 0 {
		t.Fatalf("tables create: %d %s", code, errb.String())
	}
	c := e.Client()
	protect := func(on bool) {
		t.Helper()
		if _, err := c.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), DeletionProtectionEnabled: aws.Bool(on)}); err != nil {
			t.Fatalf("UpdateTable DeletionProtectionEnabled=%v: %v", on, err)
		}
	}
	t.Cleanup(func() {
		_, _ = c.UpdateTable(context.Background(), &dynamodb.UpdateTableInput{TableName: aws.String(name), DeletionProtectionEnabled: aws.Bool(false)})
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	doctor := func(args ...string) (int, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"doctor", "--table", "IdempotencyTable=" + name, "--only", "idempotency"}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, s := doctor("--endpoint", e.Endpoint, "--region", e.Region); code != 0 || !strings.Contains(s, "IdempotencyTable\t"+name+"\tok\n") {
		t.Fatalf("at an --endpoint, a local table without deletion protection: exit %d\n%s", code, s)
	}
	fakeAWSCredentials(t)
	t.Setenv("AWS_REGION", e.Region)
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", e.Endpoint)
	want := "  - deletion protection: disabled (template: enabled; one delete-table call removes the table and every record in it); turn it on: aws dynamodb update-table --table-name " + name + " --region " + e.Region + " --deletion-protection-enabled\n"
	if code, s := doctor(); code != 1 || !strings.Contains(s, "IdempotencyTable\t"+name+"\tdiffers\n"+want) {
		t.Fatalf("on AWS, a table without deletion protection: exit %d\n%s\nwant 1, differs, and\n%s", code, s, want)
	}
	protect(true)
	if code, s := doctor(); code != 0 || !strings.Contains(s, "IdempotencyTable\t"+name+"\tok\n") {
		t.Fatalf("on AWS, the table with deletion protection: exit %d\n%s", code, s)
	}
}
