package dynamostore_test

import (
	"flag"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/tables"
	"github.com/idemkit/idemkit/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite docs/idempotency-table.yaml from template.yaml")

// The store reaches DynamoDB only through the API interface, so its
// methods are every call the store can make: IAMActions must be exactly the
// IAM actions those calls need on the table (TransactWriteItems is
// authorised per item: the completion is a PutItem on this table).
func TestIAMActionsMatchTheStoresCalls(t *testing.T) {
	needs := map[string]string{"TransactWriteItems": "PutItem"}
	api := reflect.TypeFor[dynamostore.API]()
	var want []string
	for i := range api.NumMethod() {
		m := api.Method(i).Name
		if n, ok := needs[m]; ok {
			m = n
		}
		if a := "dynamodb:" + m; !slices.Contains(want, a) {
			want = append(want, a)
		}
	}
	slices.Sort(want)
	if !slices.Equal(want, dynamostore.IAMActions) {
		t.Fatalf("IAMActions = %v, the store's calls need %v", dynamostore.IAMActions, want)
	}
	// The reference host's API role grants exactly these on the table.
	if got := grantsOnIdempotencyTable(t); !slices.Equal(got, dynamostore.IAMActions) {
		t.Fatalf("template.yaml ApiRole grants %v on IdempotencyTable, the store needs %v", got, dynamostore.IAMActions)
	}
}

// grantsOnIdempotencyTable returns the sorted actions of the ApiRole
// statement whose resource is !GetAtt IdempotencyTable.Arn.
func grantsOnIdempotencyTable(t *testing.T) []string {
	t.Helper()
	var doc struct {
		Resources map[string]struct {
			Properties struct {
				Policies []struct {
					PolicyDocument struct {
						Statement []yaml.Node `yaml:"Statement"`
					} `yaml:"PolicyDocument"`
				} `yaml:"Policies"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(idemkit.Template, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range doc.Resources["ApiRole"].Properties.Policies {
		for _, n := range p.PolicyDocument.Statement {
			var st struct {
				Action   []string  `yaml:"Action"`
				Resource yaml.Node `yaml:"Resource"`
			}
			if n.Decode(&st) != nil {
				continue // a conditional statement (!If): not the one
			}
			found := false
			var walk func(n *yaml.Node)
			walk = func(n *yaml.Node) {
				if n.Kind == yaml.ScalarNode && n.Tag == "!GetAtt" && n.Value == "IdempotencyTable.Arn" {
					found = true
				}
				for _, c := range n.Content {
					walk(c)
				}
			}
			walk(&st.Resource)
			if found {
				a := slices.Clone(st.Action)
				slices.Sort(a)
				return a
			}
		}
	}
	t.Fatal("template.yaml ApiRole has no statement on IdempotencyTable")
	return nil
}

// docs/idempotency-table.yaml, the copy-paste table and permissions for a
// function that uses idem with dynamostore, is generated from template.yaml's
// IdempotencyTable and IAMActions; this test keeps it in sync
// (go test ./idem/dynamostore -run TestIdempotencyTableSnippet -update
// rewrites it).
func TestIdempotencyTableSnippet(t *testing.T) {
	defs, err := tables.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	d, ok := defs["IdempotencyTable"]
	if !ok {
		t.Fatal("template.yaml has no IdempotencyTable")
	}
	want := idempotencySnippet(t, d)
	testutil.Generated(t, "docs/idempotency-table.yaml", want, *update, "go test ./idem/dynamostore -run TestIdempotencyTableSnippet -update")
	var parsed map[string]any
	if err := yaml.Unmarshal([]byte(stripTags(want)), &parsed); err != nil {
		t.Fatalf("snippet is not YAML: %v", err)
	}
}

func stripTags(s string) string { return strings.NewReplacer("!Ref ", "", "!GetAtt ", "").Replace(s) }

func idempotencySnippet(t *testing.T, d tables.Def) string {
	t.Helper()
	var b strings.Builder
	w := func(s string) { b.WriteString(s + "\n") }
	w("# The idempotency table and the permissions of a function that uses idem with")
	w("# idem/dynamostore, as a SAM template: paste its Resources into yours.")
	w("# Generated from template.yaml's IdempotencyTable (single-region: a plain table;")
	w("# template.yaml makes it a global table with a stream for multi-region setups)")
	w("# and dynamostore.IAMActions; a test keeps it in sync with both.")
	w("AWSTemplateFormatVersion: \"2010-09-09\"")
	w("Transform: AWS::Serverless-2016-10-31")
	w("Resources:")
	w("  IdempotencyTable:")
	w("    Type: AWS::DynamoDB::Table")
	w("    # The records outlive the stack: deleting the stack, or an update that")
	w("    # replaces the table, keeps it, and deletion protection refuses a delete")
	w("    # by hand, so a retry after a redeploy still finds what its key did.")
	w("    DeletionPolicy: Retain")
	w("    UpdateReplacePolicy: Retain")
	w("    Properties:")
	w("      BillingMode: " + string(d.BillingMode))
	w("      AttributeDefinitions:")
	for _, a := range d.AttributeDefinitions {
		w("        - AttributeName: " + *a.AttributeName)
		w("          AttributeType: " + string(a.AttributeType))
	}
	w("      KeySchema:")
	for _, k := range d.KeySchema {
		w("        - AttributeName: " + *k.AttributeName)
		w("          KeyType: " + string(k.KeyType))
	}
	if len(d.GlobalSecondaryIndexes)+len(d.LocalSecondaryIndexes) > 0 || d.ProvisionedThroughput != nil {
		t.Fatal("IdempotencyTable gained indexes or provisioned throughput: teach the snippet generator")
	}
	if d.TTLAttribute != "" {
		w("      TimeToLiveSpecification:")
		w("        AttributeName: " + d.TTLAttribute)
		w("        Enabled: true")
	}
	w("      PointInTimeRecoverySpecification:")
	w("        PointInTimeRecoveryEnabled: true")
	w("      DeletionProtectionEnabled: true")
	w("")
	policy := func() {
		w("      Policies:")
		w("        - Statement:")
		w("            - Effect: Allow")
		w("              Action: [" + strings.Join(dynamostore.IAMActions, ", ") + "]")
		w("              Resource: !GetAtt IdempotencyTable.Arn")
	}
	w("  # Your API function (examples/orders): sam build compiles the Go package in")
	w("  # CodeUri into the bootstrap binary provided.al2023 runs (BuildMethod go1.x);")
	w("  # the table name in IDEMPOTENCY_TABLE and exactly the actions")
	w("  # idem/dynamostore calls, on that table only.")
	w("  OrdersFunction:")
	w("    Type: AWS::Serverless::Function")
	w("    Metadata:")
	w("      BuildMethod: go1.x")
	w("    Properties:")
	w("      CodeUri: .")
	w("      Handler: bootstrap")
	w("      Runtime: provided.al2023")
	w("      Architectures: [arm64]")
	w("      # An HTTP API waits at most 30 s for its integration. Inside Lambda a")
	w("      # Layer-1 claim's lease ends at most 10 s after the invocation's")
	w("      # deadline, so a retry of a timed-out request can reclaim it then.")
	w("      Timeout: 29")
	w("      Environment:")
	w("        Variables:")
	w("          IDEMPOTENCY_TABLE: !Ref IdempotencyTable")
	policy()
	w("      Events:")
	w("        CreateOrder:")
	w("          Type: HttpApi")
	w("          Properties:")
	w("            Method: POST")
	w("            Path: /orders")
	w("            PayloadFormatVersion: \"2.0\"")
	w("")
	w("  # The SQS consumer of the same code (ORDERS_HANDLER=sqs): each message once;")
	w("  # only the failed ones are redelivered (ReportBatchItemFailures).")
	w("  ShipOrdersFunction:")
	w("    Type: AWS::Serverless::Function")
	w("    Metadata:")
	w("      BuildMethod: go1.x")
	w("    Properties:")
	w("      CodeUri: .")
	w("      Handler: bootstrap")
	w("      Runtime: provided.al2023")
	w("      Architectures: [arm64]")
	w("      Timeout: 30")
	w("      Environment:")
	w("        Variables:")
	w("          IDEMPOTENCY_TABLE: !Ref IdempotencyTable")
	w("          ORDERS_HANDLER: sqs")
	policy()
	w("      Events:")
	w("        Orders:")
	w("          Type: SQS")
	w("          Properties:")
	w("            Queue: !GetAtt OrdersQueue.Arn")
	w("            FunctionResponseTypes: [ReportBatchItemFailures]")
	w("")
	w("  # A redelivery comes VisibilityTimeout after the receive: at least six")
	w("  # times the consumer's Timeout, so a claim left by a timed-out invocation")
	w("  # (its lease ends at most 10 s after the deadline) has expired when the")
	w("  # message comes back.")
	w("  OrdersQueue:")
	w("    Type: AWS::SQS::Queue")
	w("    Properties:")
	w("      VisibilityTimeout: 180")
	w("      # A message that fails on every delivery (a handler that always errs,")
	w("      # or a payload that differs from the one recorded under its key) moves")
	w("      # to the dead-letter queue after maxReceiveCount receives, not forever.")
	w("      RedrivePolicy:")
	w("        deadLetterTargetArn: !GetAtt OrdersDeadLetterQueue.Arn")
	w("        maxReceiveCount: 5")
	w("")
	w("  # Where those messages wait (14 days) for someone to look, fix and redrive.")
	w("  OrdersDeadLetterQueue:")
	w("    Type: AWS::SQS::Queue")
	w("    Properties:")
	w("      MessageRetentionPeriod: 1209600")
	return b.String()
}
