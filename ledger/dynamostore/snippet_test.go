package dynamostore_test

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/tables"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/ledger/dynamostore"
)

var update = flag.Bool("update", false, "rewrite docs/effects-table.yaml from template.yaml")

// snippetLease and snippetTimeout are the ledger worker's lease
// (EFFECT_LEASE_SECONDS) and Lambda Timeout in the snippet: the lease is
// below the Timeout, and the queue's VisibilityTimeout (six times the
// Timeout) above their sum, so a claim left by a timed-out invocation has
// expired when SQS redelivers its message.
const (
	snippetLease   = 60
	snippetTimeout = 120
)

// docs/effects-table.yaml, the copy-paste effects table and ledger worker
// for a function that uses ledger with dynamostore, is generated from
// template.yaml's EffectsTable and the store's IAM action lists, and
// docs/DEPLOYING.md shows it verbatim; this test keeps all three in sync
// (go test ./ledger/dynamostore -run TestDeployDocEffectsTableSnippetMatchesTemplate -update
// rewrites the YAML file).
func TestDeployDocEffectsTableSnippetMatchesTemplate(t *testing.T) {
	defs, err := tables.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	d, ok := defs["EffectsTable"]
	if !ok {
		t.Fatal("template.yaml has no EffectsTable")
	}
	want := effectsSnippet(t, d)
	testutil.Generated(t, "docs/effects-table.yaml", want, *update, "go test ./ledger/dynamostore -run TestDeployDocEffectsTableSnippetMatchesTemplate -update")
	var parsed map[string]any
	if err := yaml.Unmarshal([]byte(strings.NewReplacer("!Ref ", "", "!GetAtt ", "", "!Sub ", "").Replace(want)), &parsed); err != nil {
		t.Fatalf("snippet is not YAML: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join(shared.ModuleRoot(), "docs", "DEPLOYING.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```yaml\n"+want+"```\n") {
		t.Fatal("docs/DEPLOYING.md does not show docs/effects-table.yaml verbatim in a yaml block")
	}
}

func effectsSnippet(t *testing.T, d tables.Def) string {
	t.Helper()
	var b strings.Builder
	w := func(s string) { b.WriteString(s + "\n") }
	w("# The effects table and a ledger worker that uses ledger with")
	w("# ledger/dynamostore, as a SAM template: paste its Resources into yours.")
	w("# Generated from template.yaml's EffectsTable (single-region: a plain table")
	w("# without a stream; template.yaml makes it a global table with a stream for")
	w("# multi-region setups and the auditor) and the store's IAM action lists;")
	w("# a test keeps it in sync with both.")
	w("AWSTemplateFormatVersion: \"2010-09-09\"")
	w("Transform: AWS::Serverless-2016-10-31")
	w("Resources:")
	w("  EffectsTable:")
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
	if len(d.GlobalSecondaryIndexes) != 1 || *d.GlobalSecondaryIndexes[0].IndexName != dynamostore.IndexByRun ||
		len(d.LocalSecondaryIndexes) > 0 || d.ProvisionedThroughput != nil {
		t.Fatal("EffectsTable's indexes or throughput changed: teach the snippet generator")
	}
	w("      GlobalSecondaryIndexes:")
	for _, g := range d.GlobalSecondaryIndexes {
		w("        - IndexName: " + *g.IndexName)
		w("          KeySchema:")
		for _, k := range g.KeySchema {
			w("            - AttributeName: " + *k.AttributeName)
			w("              KeyType: " + string(k.KeyType))
		}
		w("          Projection:")
		w("            ProjectionType: " + string(g.Projection.ProjectionType))
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
	w("  # Your ledger worker (examples/refunds), fed by an SQS queue: sam build")
	w("  # compiles the Go package in CodeUri into the bootstrap binary")
	w("  # provided.al2023 runs (BuildMethod go1.x); the table name in")
	w("  # EFFECTS_TABLE and exactly the actions its Ledger.Do calls, on the table.")
	w("  # A function that also lists a run's effects (Ledger.Witness, resolving")
	w("  # a run's escaped effects) adds dynamodb:Query on the byRun index:")
	w("  # !Sub \"${EffectsTable.Arn}/index/byRun\".")
	w("  RefundsFunction:")
	w("    Type: AWS::Serverless::Function")
	w("    Metadata:")
	w("      BuildMethod: go1.x")
	w("    Properties:")
	w("      CodeUri: .")
	w("      Handler: bootstrap")
	w("      Runtime: provided.al2023")
	w("      Architectures: [arm64]")
	w("      # Above the claim lease (EFFECT_LEASE_SECONDS, renewed every lease/3")
	w("      # while an effect runs): a claim left by a timed-out invocation")
	w("      # expires at most one lease after its last renewal.")
	w("      Timeout: " + strconv.Itoa(snippetTimeout))
	w("      Environment:")
	w("        Variables:")
	w("          EFFECTS_TABLE: !Ref EffectsTable")
	w("          EFFECT_LEASE_SECONDS: \"" + strconv.Itoa(snippetLease) + "\"")
	w("          # The tenant whose refunds RefundsQueue carries (the worker never")
	w("          # reads one from a message): a queue and a worker per tenant, only")
	w("          # that tenant's producer granted sqs:SendMessage on its queue.")
	w("          TENANT: acme")
	w("      Policies:")
	w("        - Statement:")
	w("            - Effect: Allow")
	w("              Action: [" + strings.Join(dynamostore.IAMActions, ", ") + "]")
	w("              Resource: !GetAtt EffectsTable.Arn")
	w("      Events:")
	w("        Refunds:")
	w("          Type: SQS")
	w("          Properties:")
	w("            Queue: !GetAtt RefundsQueue.Arn")
	w("            FunctionResponseTypes: [ReportBatchItemFailures]")
	w("")
	w("  # A redelivery comes VisibilityTimeout after the receive: six times the")
	w("  # worker's Timeout, more than the Timeout plus one lease, so the claim of")
	w("  # a timed-out invocation has expired when its message comes back.")
	w("  RefundsQueue:")
	w("    Type: AWS::SQS::Queue")
	w("    Properties:")
	w("      VisibilityTimeout: " + strconv.Itoa(6*snippetTimeout))
	w("      # A message that fails on every delivery (a body that is not the JSON")
	w("      # the worker reads, a refund the provider keeps refusing) moves to the")
	w("      # dead-letter queue after maxReceiveCount receives, not round and round")
	w("      # until the queue's retention drops it unseen.")
	w("      RedrivePolicy:")
	w("        deadLetterTargetArn: !GetAtt RefundsDeadLetterQueue.Arn")
	w("        maxReceiveCount: 5")
	w("")
	w("  # Where those messages wait (14 days) for someone to look, fix and redrive.")
	w("  RefundsDeadLetterQueue:")
	w("    Type: AWS::SQS::Queue")
	w("    Properties:")
	w("      MessageRetentionPeriod: 1209600")
	return b.String()
}
