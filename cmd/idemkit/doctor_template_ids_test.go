package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
)

// RED_TEAM 518: a table of a --template FILE whose logical ID is not one
// of template.yaml's five (a user's own stack: OrdersTable) can be named
// with --table and --only, as doctor's help says (--table LogicalID=NAME):
// checked on AWS by its deployed name. Before, --table OrdersTable=NAME
// and --only OrdersTable were usage errors (only template.yaml's IDs were
// known), and the table was "not checked" with the advice "give --table
// OrdersTable=NAME or $", a flag value refused and a variable with no
// name. A logical ID the template lacks is still a usage error, naming
// the template's tables; template.yaml's own IDs and short names work as
// before.
func TestDoctorNamesATemplatesOwnTables(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmpl := filepath.Join(t.TempDir(), "orders.yaml")
	const body = `Resources:
  OrdersTable:
    Type: AWS::DynamoDB::Table
    Properties:
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
  IdempotencyTable:
    Type: AWS::DynamoDB::Table
    Properties:
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
`
	if err := os.WriteFile(tmpl, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	defs, err := tables.Defs([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "orders-" + hex.EncodeToString(b[:])
	if _, err := tables.CreateDef(ctx, e.Client(), defs["OrdersTable"], name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.Client().DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	fakeAWSCredentials(t)
	t.Setenv("AWS_REGION", e.Region)
	t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", e.Endpoint)
	doctor := func(args ...string) (int, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(ctx, append([]string{"doctor", "--template", tmpl}, args...), &out, &errb)
		return code, out.String() + errb.String()
	}
	if code, s := doctor("--table", "OrdersTable="+name, "--only", "OrdersTable"); code != 0 || s != "OrdersTable\t"+name+"\tok\n" {
		t.Errorf("--table OrdersTable=NAME --only OrdersTable: exit %d\n%s\nwant 0 and ok", code, s)
	}
	code, s := doctor("--table", "OrdersTable="+name, "--table", "idempotency="+name)
	if code != 0 || !strings.Contains(s, "OrdersTable\t"+name+"\tok\n") || !strings.Contains(s, "IdempotencyTable\t"+name+"\tok\n") {
		t.Errorf("a template's own ID beside a short name: exit %d\n%s", code, s)
	}
	if code, s := doctor("--table", "idempotency="+name); !strings.Contains(s, "OrdersTable\t-\tnot checked\n  ? no name: give --table OrdersTable=NAME\n") || strings.Contains(s, " or $") {
		t.Errorf("a table of the template without a name: exit %d\n%s\nwant its advice to give --table OrdersTable=NAME alone", code, s)
	}
	for _, args := range [][]string{{"--table", "NopeTable=" + name}, {"--table", "idempotency=" + name, "--only", "NopeTable"}} {
		if code, s := doctor(args...); code != 2 || !strings.Contains(s, "NopeTable") || !strings.Contains(s, "IdempotencyTable, OrdersTable") {
			t.Errorf("%q: exit %d\n%s\nwant 2 naming NopeTable and the template's tables", args, code, s)
		}
	}
	// Without --template, an ID template.yaml lacks is refused as before.
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"doctor", "--table", "OrdersTable=" + name}, &out, &errb); code != 2 {
		t.Errorf("--table OrdersTable=NAME against template.yaml: exit %d, want 2\n%s%s", code, out.String(), errb.String())
	}
}

// RED_TEAM 519: a --template with no DynamoDB table (a template of
// functions only, or the wrong file) is said to be so, a usage error.
// Before, doctor answered "no table to check: give --endpoint, --table
// LogicalID=NAME or the tables' variables" even when --endpoint was given.
func TestDoctorTemplateWithoutTables(t *testing.T) {
	tmpl := filepath.Join(t.TempDir(), "functions.yaml")
	if err := os.WriteFile(tmpl, []byte("Resources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Properties: {Handler: bootstrap}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"doctor", "--endpoint", "http://127.0.0.1:9", "--template", tmpl}, &out, &errb)
	if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "has no DynamoDB table") || strings.Contains(errb.String(), "give --endpoint") {
		t.Errorf("exit %d, want 2 saying the template has no DynamoDB table\n%s%s", code, out.String(), errb.String())
	}
}
