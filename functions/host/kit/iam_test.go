package kit_test

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/functions/sweeper/sweepfn"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// A grant or a use is "Action Resource", the resource a logical table ID of
// template.yaml with an optional "/index/NAME" or "/stream" suffix:
// "dynamodb:Query EffectsTable/index/byRun".

var (
	subArnRe      = regexp.MustCompile(`\$\{(\w+)\.Arn\}(/index/\w+|/stream)?`)
	subExistingRe = regexp.MustCompile(`:table/\$\{Existing(\w+)\}(/index/\w+|/stream)?`)
)

// templateResource returns the resource name of template.yaml (its
// Resources entry), failing t when there is none.
func templateResource(t *testing.T, name string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(idemkit.Template, &doc); err != nil {
		t.Fatal(err)
	}
	res := yamlFind(yamlFind(doc.Content[0], "Resources"), name)
	if res == nil {
		t.Fatalf("template.yaml has no %s", name)
	}
	return res
}

// yamlFind returns the value of key in the YAML mapping n, or nil.
func yamlFind(n *yaml.Node, key string) *yaml.Node {
	if n != nil && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i+1]
			}
		}
	}
	return nil
}

// yamlScalars returns the scalar nodes under n, n itself included.
func yamlScalars(n *yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	var walk func(*yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode {
			out = append(out, n)
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return out
}

// resourceTables returns the tables a statement's Resource names, as
// logical IDs with an optional "/index/NAME" or "/stream" suffix: each
// !GetAtt T.Arn, and each ${T.Arn} or table/${ExistingT} of a !Sub, in a
// list or an !If branch alike.
func resourceTables(rsc *yaml.Node) []string {
	var tables []string
	for _, s := range yamlScalars(rsc) {
		switch s.Tag {
		case "!GetAtt":
			if id, ok := strings.CutSuffix(s.Value, ".Arn"); ok {
				tables = append(tables, id)
			}
		case "!Sub":
			for _, m := range subArnRe.FindAllStringSubmatch(s.Value, -1) {
				tables = append(tables, m[1]+strings.TrimSuffix(m[2], "/*"))
			}
			for _, m := range subExistingRe.FindAllStringSubmatch(s.Value, -1) {
				tables = append(tables, m[1]+strings.TrimSuffix(m[2], "/*"))
			}
		}
	}
	return tables
}

// roleGrants returns the DynamoDB "Action Resource" pairs template.yaml
// grants to a role (statements under a condition count as granted: the
// test enables what they guard).
func roleGrants(t *testing.T, role string) map[string]bool {
	t.Helper()
	res := templateResource(t, role)
	out := map[string]bool{}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if act, rsc := yamlFind(n, "Action"), yamlFind(n, "Resource"); act != nil && rsc != nil {
			tables := resourceTables(rsc)
			for _, a := range yamlScalars(act) {
				if strings.HasPrefix(a.Value, "dynamodb:") {
					for _, tb := range tables {
						out[a.Value+" "+tb] = true
					}
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(res)
	return out
}

// tableUse records the "dynamodb:Action Table" pairs a client's calls need
// in IAM terms: TransactWriteItems is authorised per item (PutItem,
// UpdateItem, DeleteItem, ConditionCheckItem on each item's table), a query
// of an index on the index's ARN.
type tableUse struct {
	mu     sync.Mutex
	tables map[string]string // physical name -> logical ID
	used   map[string]int
	// leading holds, per "dynamodb:Action Table" of an item-level call
	// (GetItem, PutItem, UpdateItem, DeleteItem, and each item of a
	// transaction or batch), the partition key values it named: what IAM's
	// dynamodb:LeadingKeys condition key sees.
	leading map[string][]string
}

func newTableUse(logical map[string]string) *tableUse {
	u := &tableUse{tables: map[string]string{}, used: map[string]int{}, leading: map[string][]string{}}
	for id, name := range logical {
		u.tables[name] = id
	}
	return u
}

func (u *tableUse) add(action string, table *string, suffix string) {
	u.addKey(action, table, suffix, nil)
}

// addKey is add for an item-level call whose partition key is key["pk"]
// (every table of the stack names its partition key "pk").
func (u *tableUse) addKey(action string, table *string, suffix string, key map[string]types.AttributeValue) {
	id := "?"
	if table != nil {
		if l, ok := u.tables[*table]; ok {
			id = l
		} else {
			id = "?" + *table
		}
	}
	u.mu.Lock()
	u.used["dynamodb:"+action+" "+id+suffix]++
	if pk, ok := key["pk"].(*types.AttributeValueMemberS); ok {
		k := "dynamodb:" + action + " " + id + suffix
		u.leading[k] = append(u.leading[k], pk.Value)
	}
	u.mu.Unlock()
}

func (u *tableUse) record(op string, in any) {
	switch p := in.(type) {
	case *dynamodb.GetItemInput:
		u.addKey("GetItem", p.TableName, "", p.Key)
	case *dynamodb.PutItemInput:
		u.addKey("PutItem", p.TableName, "", p.Item)
	case *dynamodb.UpdateItemInput:
		u.addKey("UpdateItem", p.TableName, "", p.Key)
	case *dynamodb.DeleteItemInput:
		u.addKey("DeleteItem", p.TableName, "", p.Key)
	case *dynamodb.ScanInput:
		suffix := ""
		if p.IndexName != nil {
			suffix = "/index/" + *p.IndexName
		}
		u.add("Scan", p.TableName, suffix)
	case *dynamodb.QueryInput:
		suffix := ""
		if p.IndexName != nil {
			suffix = "/index/" + *p.IndexName
		}
		u.add("Query", p.TableName, suffix)
	case *dynamodb.BatchGetItemInput:
		for tb := range p.RequestItems {
			u.add("BatchGetItem", aws.String(tb), "")
		}
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				u.addKey("PutItem", it.Put.TableName, "", it.Put.Item)
			case it.Update != nil:
				u.addKey("UpdateItem", it.Update.TableName, "", it.Update.Key)
			case it.Delete != nil:
				u.addKey("DeleteItem", it.Delete.TableName, "", it.Delete.Key)
			case it.ConditionCheck != nil:
				u.addKey("ConditionCheckItem", it.ConditionCheck.TableName, "", it.ConditionCheck.Key)
			}
		}
	case *dynamodb.TransactGetItemsInput:
		for _, it := range p.TransactItems {
			if it.Get != nil {
				u.add("GetItem", it.Get.TableName, "")
			}
		}
	case *dynamodb.ListTagsOfResourceInput:
		// The table's ARN: its name is what follows "table/".
		_, name, _ := strings.Cut(aws.ToString(p.ResourceArn), ":table/")
		u.add("ListTagsOfResource", aws.String(name), "")
	default:
		u.add(op, nil, "") // an operation this check does not map: never granted
	}
}

// Middleware records every call made through the client.
func (u *tableUse) Middleware() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("kit.tableUse",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					u.record(middleware.GetOperationName(ctx), in.Parameters)
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	}
}

// checkGranted fails the test for every (action, table) a function used that
// its role in template.yaml does not grant on that very table, and for any
// table its role grants that is not one of the tables the function is
// meant to touch.
func checkGranted(t *testing.T, role string, u *tableUse, allowedTables ...string) {
	t.Helper()
	granted := roleGrants(t, role)
	u.mu.Lock()
	defer u.mu.Unlock()
	var used []string
	for k := range u.used {
		used = append(used, k)
		if !granted[k] {
			t.Errorf("%s: the function calls %q, which template.yaml does not grant it on that table", role, k)
		}
	}
	allowed := map[string]bool{}
	for _, a := range allowedTables {
		allowed[a] = true
	}
	var grants []string
	for g := range granted {
		grants = append(grants, g)
		_, tb, _ := strings.Cut(g, " ")
		if !allowed[tb] {
			t.Errorf("%s grants %q: not a table this function uses", role, g)
		}
	}
	sort.Strings(used)
	sort.Strings(grants)
	t.Logf("%s used %v; granted %v", role, used, grants)
}

// checkAllUsed fails the test for every action role grants on table that
// the function did not use in the test: where the test exercises every
// path of the function that writes table, a grant left unused is wider
// than the function needs.
func checkAllUsed(t *testing.T, role string, u *tableUse, table string) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	for g := range roleGrants(t, role) {
		if _, tb, _ := strings.Cut(g, " "); tb == table && u.used[g] == 0 {
			t.Errorf("%s grants %q, which the function never used on %s", role, g, table)
		}
	}
}

// TestRoleGrantsParse pins the parser on the template itself: every role
// has DynamoDB grants, and no role reaches another function's tables.
func TestRoleGrantsParse(t *testing.T) {
	want := map[string][]string{
		// ApiRole's FenceTable grant is dynamodb:ListTagsOfResource alone,
		// in a replica stack (TestApiReadsOnlyTheFenceTablesTags).
		"ApiRole":        {"IdempotencyTable", "RunsTable", "EffectsTable/index/byRun", "EffectsTable", "FenceTable"},
		"AuthorizerRole": {"ApiKeysTable"},
		"ExecutorRole":   {"RunsTable", "RunsTable/stream", "RunsTable/index/byWake", "RunsTable/index/byLive", "EffectsTable", "FenceTable", "ApiKeysTable"},
		"AuditorRole":    {"EffectsTable/stream", "IdempotencyTable/stream", "IdempotencyTable", "EffectsTable"},
		"SweeperRole":    {"EffectsTable", "IdempotencyTable"},
	}
	for role, tables := range want {
		g := roleGrants(t, role)
		if len(g) == 0 {
			t.Fatalf("%s: no DynamoDB grants parsed", role)
		}
		seen := map[string]bool{}
		for k := range g {
			_, tb, _ := strings.Cut(k, " ")
			seen[tb] = true
		}
		for _, tb := range tables {
			if !seen[tb] {
				t.Errorf("%s: no grant on %s (parsed %v)", role, tb, g)
			}
			delete(seen, tb)
		}
		for tb := range seen {
			t.Errorf("%s: grants on %s, which it must not touch", role, tb)
		}
	}
	// The write paths are where over-granting would hurt: the authorizer
	// writes nothing, and the auditor only the conditional PutItems that
	// restore a Layer-1 conflict's winner and a completed effect record
	// over the other region's claim (reconciled-records only).
	for _, role := range []string{"AuthorizerRole", "AuditorRole"} {
		for k := range roleGrants(t, role) {
			if role == "AuditorRole" && (k == "dynamodb:PutItem IdempotencyTable" || k == "dynamodb:PutItem EffectsTable") {
				continue
			}
			for _, w := range []string{"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"} {
				if strings.Contains(k, ":"+w+" ") {
					t.Errorf("%s may write: %s", role, k)
				}
			}
		}
	}
}

// TestApiReadsOnlyTheFenceTablesTags: the api function's one grant on
// FenceTable is the read of its tags (the home stack's CrossRegion, read at
// a replica stack's start-up, RED_TEAM 537): it takes no fencing token.
func TestApiReadsOnlyTheFenceTablesTags(t *testing.T) {
	for g := range roleGrants(t, "ApiRole") {
		if a, tb, _ := strings.Cut(g, " "); tb == "FenceTable" && a != "dynamodb:ListTagsOfResource" {
			t.Errorf("ApiRole grants %q", g)
		}
	}
}

// The sweeper function, wired from the environment the template gives it
// (EFFECTS_TABLE under EffectsConsistency STRONG, IDEMPOTENCY_TABLE in a
// fenced-effects home stack), calls nothing its role does not grant on those
// very tables, and its role grants nothing but dynamodb:Scan and
// dynamodb:DeleteItem, on those two tables only (which one in which
// configuration: internal/regionsim's TestTemplateSweeperPerPosture).
func TestSweeperLeastPrivilege(t *testing.T) {
	for k := range roleGrants(t, "SweeperRole") {
		if a, _, _ := strings.Cut(k, " "); a != "dynamodb:Scan" && a != "dynamodb:DeleteItem" {
			t.Errorf("SweeperRole grants %s", k)
		}
	}
	e := dynamotest.Start(t, dynamotest.Moto)
	table := e.CreateTable(t, "EffectsTable")
	c := e.Client()
	for i := range 10 {
		exp := time.Now().Add(time.Duration(i%2*2-1) * time.Hour) // half expired
		if _, err := c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "e" + strconv.Itoa(i)}, "sk": &types.AttributeValueMemberS{Value: "record"},
			"expiresAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(exp.Unix(), 10)}}}); err != nil {
			t.Fatal(err)
		}
	}
	idemTable := e.CreateTable(t, "IdempotencyTable")
	for i := range 4 {
		exp := time.Now().Add(time.Duration(i%2*2-1) * time.Hour) // half expired
		if _, err := c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(idemTable), Item: map[string]types.AttributeValue{
			"pk":        &types.AttributeValueMemberS{Value: "i" + strconv.Itoa(i)},
			"expiresAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(exp.Unix(), 10)}}}); err != nil {
			t.Fatal(err)
		}
	}
	use := newTableUse(map[string]string{"EffectsTable": table, "IdempotencyTable": idemTable})
	h, err := sweepfn.NewFromEnv(settings.Env{EffectsTable: table, Idem: idemenv.Env{Table: idemTable}}, e.Client(use.Middleware()), nil, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := h.Sweep(context.Background())
	if err != nil || rep.Tables[0].Deleted != 5 || rep.Tables[1].Deleted != 2 {
		t.Fatalf("%+v %v", rep, err)
	}
	checkGranted(t, "SweeperRole", use, "EffectsTable", "IdempotencyTable")
	checkAllUsed(t, "SweeperRole", use, "EffectsTable")
	checkAllUsed(t, "SweeperRole", use, "IdempotencyTable")
}

// leadingKeyRefusals returns, for each statement of role in template.yaml
// that grants an item-level action (GetItem, PutItem, UpdateItem,
// DeleteItem) on the table itself (however its Resource names it), the
// partition key patterns its condition refuses
// (ForAllValues:StringNotLike on dynamodb:LeadingKeys); a statement
// without one maps to nil.
func leadingKeyRefusals(t *testing.T, role, table string) [][]string {
	t.Helper()
	return leadingKeyConditions(t, role, table, "ForAllValues:StringNotLike")
}

// leadingKeyConditions is leadingKeyRefusals for the condition operator
// cond: "ForAllValues:StringNotLike" (the patterns refused) or
// "ForAllValues:StringLike" (the only patterns allowed).
func leadingKeyConditions(t *testing.T, role, table, cond string) [][]string {
	t.Helper()
	res := templateResource(t, role)
	var out [][]string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if act, rsc := yamlFind(n, "Action"), yamlFind(n, "Resource"); act != nil && rsc != nil &&
			slices.Contains(resourceTables(rsc), table) {
			item := false
			for _, a := range yamlScalars(act) {
				switch a.Value {
				case "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem":
					item = true
				}
			}
			if item {
				var pats []string
				if lk := yamlFind(yamlFind(yamlFind(n, "Condition"), cond), "dynamodb:LeadingKeys"); lk != nil {
					if lk.Kind == yaml.ScalarNode {
						pats = append(pats, lk.Value)
					}
					for _, p := range lk.Content {
						pats = append(pats, p.Value)
					}
				}
				out = append(out, pats)
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(res)
	return out
}

// TestExecutorReachesRunsOnly: RunsTable holds, beside the runs, items
// whose pk starts with "#" (runs.itemPrefix: a caller's inbox with the
// bodies of its refused offline writes, a run scope's holder), which only
// the api function reads and writes. The executor
// reads and moves runs only, so its role's item-level grant on RunsTable
// refuses every partition key starting with "#" (dynamodb:LeadingKeys):
// an executor made to name another item (a bug, a hostile stream record)
// can neither read a tenant's inbox nor move a scope. That the executor
// never names such an item is TestWiringAndLeastPrivilege's.
func TestExecutorReachesRunsOnly(t *testing.T) {
	sts := leadingKeyRefusals(t, "ExecutorRole", "RunsTable")
	if len(sts) == 0 {
		t.Fatal("ExecutorRole: no item-level grant on RunsTable parsed: the test proves nothing")
	}
	for i, pats := range sts {
		if !slices.Contains(pats, "#*") {
			t.Errorf("ExecutorRole: item-level grant %d on RunsTable refuses leading keys %q, want ForAllValues:StringNotLike dynamodb:LeadingKeys \"#*\" (a tenant's inbox and the scope items are the api function's)", i, pats)
		}
	}
}

// checkLeadingKeys fails the test unless the function's item-level calls
// on table named a partition key starting with prefix (want true) or
// named none (want false); it needs at least one item-level call.
func checkLeadingKeys(t *testing.T, role string, u *tableUse, table, prefix string, want bool) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	n, with := 0, []string{}
	for k, pks := range u.leading {
		if _, tb, _ := strings.Cut(k, " "); tb != table {
			continue
		}
		for _, pk := range pks {
			n++
			if strings.HasPrefix(pk, prefix) {
				with = append(with, k+" "+pk)
			}
		}
	}
	switch {
	case n == 0:
		t.Errorf("%s: no item-level call on %s recorded: the check proves nothing", role, table)
	case want && len(with) == 0:
		t.Errorf("%s: no call on %s named a partition key starting %q", role, table, prefix)
	case !want && len(with) > 0:
		t.Errorf("%s: calls on %s named partition keys starting %q: %v", role, table, prefix, with)
	}
}

// TestSigningSecretsReachOnlyTheExecutor (RED_TEAM 340): ApiKeysTable
// holds the API keys' hashes ("key#" items, the authorizer's) and the
// tenants' webhook signing secrets ("whsec#" items, the executor's). Each
// role's item-level grant on it allows its own items only
// (ForAllValues:StringLike on dynamodb:LeadingKeys), and the executor's
// is GetItem alone: the authorizer, which reads every caller's
// Authorization header, cannot read a secret, and the executor cannot read
// or write a key. That each names only its own items is
// TestWiringAndLeastPrivilege's.
func TestSigningSecretsReachOnlyTheExecutor(t *testing.T) {
	for role, want := range map[string]string{"AuthorizerRole": "key#*", "ExecutorRole": "whsec#*"} {
		sts := leadingKeyConditions(t, role, "ApiKeysTable", "ForAllValues:StringLike")
		if len(sts) == 0 {
			t.Fatalf("%s: no item-level grant on ApiKeysTable parsed: the test proves nothing", role)
		}
		for i, pats := range sts {
			if len(pats) != 1 || pats[0] != want {
				t.Errorf("%s: item-level grant %d on ApiKeysTable allows leading keys %q, want exactly [%q]", role, i, pats, want)
			}
		}
	}
	for g := range roleGrants(t, "ExecutorRole") {
		if _, tb, _ := strings.Cut(g, " "); tb == "ApiKeysTable" && g != "dynamodb:GetItem ApiKeysTable" {
			t.Errorf("ExecutorRole grants %q: the executor only reads signing secrets", g)
		}
	}
}
