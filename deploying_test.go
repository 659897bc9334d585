package idemkit_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/testutil"
)

// deployDoc returns docs/DEPLOYING.md.
func deployDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("docs/DEPLOYING.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The SAM template for a user's own function (docs/idempotency-table.yaml,
// shown verbatim in docs/DEPLOYING.md) and the ledger worker's
// (docs/effects-table.yaml) pass cfn-lint and the SAM translator with the
// function checks of scripts/check_snippet.py (provided.al2023 with
// BuildMethod go1.x, a Timeout that agrees with the lease, no wildcard in
// IAM), the checks `make test` runs in sam-check; the API function has an
// HttpApi event and the consumer an SQS one.
func TestUserFunctionSnippetPassesSAMChecks(t *testing.T) {
	snippets := []string{"docs/idempotency-table.yaml", "docs/effects-table.yaml"}
	doc := deployDoc(t)
	for _, s := range snippets {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(doc, "```yaml\n"+string(b)+"```\n") {
			t.Errorf("docs/DEPLOYING.md does not show %s verbatim in a yaml block", s)
		}
	}
	var tmpl struct {
		Resources map[string]struct {
			Properties struct {
				Events map[string]struct {
					Type string `yaml:"Type"`
				} `yaml:"Events"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	b, _ := os.ReadFile(snippets[0])
	if err := yaml.Unmarshal([]byte(strings.NewReplacer("!Ref ", "", "!GetAtt ", "").Replace(string(b))), &tmpl); err != nil {
		t.Fatal(err)
	}
	for fn, want := range map[string]string{"OrdersFunction": "HttpApi", "ShipOrdersFunction": "SQS"} {
		var got []string
		for _, e := range tmpl.Resources[fn].Properties.Events {
			got = append(got, e.Type)
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: events %v, want one %s event", fn, got, want)
		}
	}
	if _, err := exec.LookPath("cfn-lint"); err != nil {
		testutil.Unavailable(t, "cfn-lint is not installed: %v", err)
	}
	for _, c := range [][]string{
		append([]string{"cfn-lint"}, snippets...),
		append([]string{"python3", "scripts/check_snippet.py"}, snippets...),
	} {
		out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
		t.Logf("%s:\n%s", strings.Join(c, " "), out)
	}
}

// The deploy guide's worker code compiles as pasted: its one Go block is
// examples/refunds/main.go, character for character.
func TestDeployDocWorkerCodeIsCompiled(t *testing.T) {
	src, err := os.ReadFile("examples/refunds/main.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := deployDoc(t)
	if n := strings.Count(doc, "```go\n"); n != 1 {
		t.Fatalf("docs/DEPLOYING.md has %d Go blocks, want 1", n)
	}
	if !strings.Contains(doc, "```go\n"+string(src)+"```\n") {
		t.Fatal("docs/DEPLOYING.md's Go block is not examples/refunds/main.go as it stands")
	}
}

// The SQS queue of each copy-paste template (the consumer's in
// docs/idempotency-table.yaml, the ledger worker's in
// docs/effects-table.yaml) has a dead-letter queue: a message that fails on
// every delivery (a payload that differs from the one recorded under its
// key, a body that is not the JSON the worker reads) stops after
// maxReceiveCount receives instead of looping until the queue's retention
// drops it unseen, and the dead-letter queue keeps it longer than the queue
// did (RED_TEAM 473: the worker's queue had none).
func TestSQSSnippetHasDeadLetterQueue(t *testing.T) {
	for file, queue := range map[string]string{"docs/idempotency-table.yaml": "OrdersQueue", "docs/effects-table.yaml": "RefundsQueue"} {
		t.Run(queue, func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var tmpl struct {
				Resources map[string]struct {
					Type       string `yaml:"Type"`
					Properties struct {
						MessageRetentionPeriod int `yaml:"MessageRetentionPeriod"`
						RedrivePolicy          *struct {
							DeadLetterTargetArn string `yaml:"deadLetterTargetArn"`
							MaxReceiveCount     int    `yaml:"maxReceiveCount"`
						} `yaml:"RedrivePolicy"`
					} `yaml:"Properties"`
				} `yaml:"Resources"`
			}
			if err := yaml.Unmarshal([]byte(strings.NewReplacer("!Ref ", "", "!GetAtt ", "").Replace(string(b))), &tmpl); err != nil {
				t.Fatal(err)
			}
			q, ok := tmpl.Resources[queue]
			if !ok || q.Type != "AWS::SQS::Queue" {
				t.Fatalf("%s has no queue %s", file, queue)
			}
			if q.Properties.RedrivePolicy == nil || q.Properties.RedrivePolicy.MaxReceiveCount < 1 {
				t.Fatalf("%s: %s has no RedrivePolicy with a maxReceiveCount", file, queue)
			}
			dlq, _, _ := strings.Cut(q.Properties.RedrivePolicy.DeadLetterTargetArn, ".")
			d, ok := tmpl.Resources[dlq]
			if !ok || d.Type != "AWS::SQS::Queue" || d.Properties.MessageRetentionPeriod < 1209600 {
				t.Fatalf("%s: the dead-letter queue %q is not a queue keeping messages 14 days: %+v", file, dlq, d)
			}
		})
	}
}

// TestReplicaStackReadsTheHomesCrossRegion: the home stack tags its
// FenceTable with its CrossRegion (kit.TagCrossRegion), and a replica-region
// stack gives its api and executor that table's ARN (HOME_FENCE_TABLE_ARN)
// and the one action that reads the tag on it, so each refuses to start
// under another CrossRegion than the home's (RED_TEAM 537). A home-region
// stack reads no tag and is granted none. Before, no stack could see the
// home's posture, and a replica deployed with another one served.
func TestReplicaStackReadsTheHomesCrossRegion(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	found := false
	for _, tg := range sequence(get(get(tp.resources["FenceTable"], "Properties"), "Tags")) {
		if get(tg, "Key").Value == kit.TagCrossRegion {
			found = true
			if v := get(tg, "Value"); v.Tag != "!Ref" || v.Value != "CrossRegion" {
				t.Errorf("FenceTable's %s tag is %s %q, want !Ref CrossRegion", kit.TagCrossRegion, v.Tag, v.Value)
			}
		}
	}
	if !found {
		t.Errorf("FenceTable carries no %s tag", kit.TagCrossRegion)
	}
	const homeFence = "arn:${AWS::Partition}:dynamodb:${HomeRegion}:${AWS::AccountId}:table/${ExistingFenceTable}"
	home := map[string]string{"CrossRegion": "fenced-effects", "ReplicaRegions": "eu-west-1"}
	for _, posture := range []string{"fenced-effects", "reconciled-records"} {
		replica := map[string]string{"CrossRegion": posture, "HomeRegion": "eu-west-1",
			"ExistingIdempotencyTable": "idem", "ExistingEffectsTable": "effects", "ExistingFenceTable": "fence", "ExistingRunsTable": "runs",
			"ExistingIdempotencyStreamLabel": "2026-01-01T00:00:00.000", "ExistingEffectsStreamLabel": "2026-01-01T00:00:00.000"}
		for fn, role := range map[string]string{"ApiFunction": "ApiRole", "ExecutorFunction": "ExecutorRole"} {
			for name, params := range map[string]map[string]string{"home": home, posture + " replica": replica} {
				env := get(get(get(tp.resolveIfs(t, tp.resources[fn], params), "Properties"), "Environment"), "Variables")
				v := get(env, settings.EnvHomeFenceTableARN)
				var tagged []*yaml.Node
				walkStatements(tp.resolveIfs(t, get(tp.resources[role], "Properties"), params), func(act, res *yaml.Node) {
					for _, a := range yamlScalarsOf(act) {
						if a.Value == "dynamodb:ListTagsOfResource" {
							tagged = append(tagged, res)
						}
					}
				})
				if name == "home" {
					if v != nil && v.Value != "" {
						t.Errorf("%s, %s stack: %s = %q, want empty", fn, name, settings.EnvHomeFenceTableARN, v.Value)
					}
					if len(tagged) > 0 {
						t.Errorf("%s, %s stack: dynamodb:ListTagsOfResource granted", role, name)
					}
					continue
				}
				if v == nil || v.Tag != "!Sub" || v.Value != homeFence {
					t.Errorf("%s, %s stack: %s is %v, want !Sub %q", fn, name, settings.EnvHomeFenceTableARN, v, homeFence)
				}
				if len(tagged) != 1 || tagged[0].Tag != "!Sub" || tagged[0].Value != homeFence {
					t.Errorf("%s, %s stack: dynamodb:ListTagsOfResource granted on %d resources, want exactly the home fence table (!Sub %q)", role, name, len(tagged), homeFence)
				}
			}
		}
	}
}

// walkStatements calls f with the Action and Resource of every IAM
// statement under n.
func walkStatements(n *yaml.Node, f func(act, res *yaml.Node)) {
	if n == nil {
		return
	}
	if act, res := get(n, "Action"), get(n, "Resource"); act != nil && res != nil {
		f(act, res)
		return
	}
	for _, c := range n.Content {
		walkStatements(c, f)
	}
}

// TestNumberParametersAreNotComparedAsText: no condition compares a Number
// parameter with !Equals, which compares the text as given: with
// `ApiReservedConcurrency` a Number, "00", "-0" or "+0" passed MinValue 0,
// were not "0", so the stack reserved them, and Lambda throttled every
// invocation of an api function reserved zero, where the description
// promised "0 - no reservation" (RED_TEAM 538). Such a parameter is a
// String whose pattern admits one spelling of each value.
func TestNumberParametersAreNotComparedAsText(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Tag == "!Equals" {
			for _, c := range n.Content {
				if c.Tag == "!Ref" && tp.params[c.Value] != nil && get(tp.params[c.Value], "Type").Value == "Number" {
					t.Errorf("line %d: !Equals compares the Number parameter %s as text", n.Line, c.Value)
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(tp.root)
	p := tp.params["ApiReservedConcurrency"]
	pat := get(p, "AllowedPattern")
	if pat == nil {
		t.Fatal("ApiReservedConcurrency has no AllowedPattern")
	}
	if d := get(p, "Default"); d == nil || d.Value != "0" {
		t.Errorf("ApiReservedConcurrency's default is %v, want 0 (no reservation)", d)
	}
	re := regexp.MustCompile(pat.Value)
	for v, want := range map[string]bool{"0": true, "1": true, "50": true, "1000": true, "99999": true,
		"00": false, "-0": false, "+0": false, "0.0": false, "1.5": false, "1e2": false, " 0": false, "": false, "-1": false, "01": false} {
		if re.MatchString(v) != want {
			t.Errorf("ApiReservedConcurrency=%q deploys: %v, want %v", v, !want, want)
		}
	}
}
