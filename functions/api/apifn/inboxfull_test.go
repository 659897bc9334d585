package apifn

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/decided"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestAFullInboxStillDecidesItsEntries: a tenant's inbox that no longer
// takes a new entry (its RunsTable item at DynamoDB's 400 KB) still
// decides every entry it holds: a discard is 200, a resubmission refused
// again is the 409 stale refusal naming the new fix with the entry handed
// back (listed, waiting; as it was taken when its updated form does not
// fit) and the same answer to its key's retry, and a resubmission against the
// run's version now runs. None of them a 500 that every retry
// of its key would repeat, with the entry held for good.
func TestAFullInboxStillDecidesItsEntries(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		queue := func(run runs.Run, key string) string {
			t.Helper()
			r, m := c.f.do(t, decidedCancel(run.ID, 1, key))
			d, _ := m["details"].(map[string]any)
			id, _ := d["inboxId"].(string)
			if r.StatusCode != 409 || id == "" {
				t.Fatalf("refusal: %d %s", r.StatusCode, r.Body)
			}
			return id
		}
		a, b := c.run(t, runs.StatusRunning), c.run(t, runs.StatusRunning)
		ida, idb := queue(a, "queued a"), queue(b, "queued b")
		fillTight(t, c.runs.Client.(*dynamodb.Client), c.runs.Table, "#inbox/acme")
		// a changes again in what its cancel decides on (still live), to
		// version 11: its updated entry is longer by two digits.
		for i := 0; i < 9; i++ {
			from, to := runs.StatusRunning, runs.StatusPending
			if i%2 == 1 {
				from, to = to, from
			}
			if _, err := c.runs.Transition(context.Background(), a.ID, []runs.Status{from}, to, "", time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		resubmit := commerceReq("POST", "/inbox/"+ida+"/resubmit", "resubmit a into a full inbox")
		r, m := c.f.do(t, resubmit)
		d, _ := m["details"].(map[string]any)
		if r.StatusCode != 409 || m["error"] != decided.CodeStale || d["inboxId"] != ida || d["currentVersion"] != 11.0 {
			t.Fatalf("a resubmission refused again in a full inbox: %d %s", r.StatusCode, r.Body)
		}
		again, _ := c.f.do(t, resubmit)
		if again.StatusCode != 409 || again.Body != r.Body {
			t.Fatalf("its key again: %d %s", again.StatusCode, again.Body)
		}
		// Handed back updated where it fits (DynamoDB Local and dynalite:
		// the decision's reserved room holds the longer entry), else as
		// it was (moto, which counts an attribute overwritten twice).
		es := c.inbox(t)
		handed := map[string]any{}
		for _, x := range es {
			if x.(map[string]any)["id"] == ida {
				handed = x.(map[string]any)
			}
		}
		if cv := handed["currentVersion"]; len(es) != 2 || cv != 2.0 && cv != 11.0 {
			t.Fatalf("the entry handed back: %v", es)
		}
		if r, m := c.f.do(t, commerceReq("POST", "/inbox/"+idb+"/discard", "discard b from a full inbox")); r.StatusCode != 200 || m["status"] != "discarded" {
			t.Fatalf("a discard in a full inbox: %d %s", r.StatusCode, r.Body)
		}
		current := commerceReq("POST", "/inbox/"+ida+"/resubmit", "resubmit a against v11")
		current.Headers["idempotency-decided-version"] = "11"
		if r, m := c.f.do(t, current); r.StatusCode != 200 || m["status"] != "cancelled" {
			t.Fatalf("a resubmission against the run's version in a full inbox: %d %s", r.StatusCode, r.Body)
		}
		if st := c.get(t, b.ID).Status; st != runs.StatusRunning || c.get(t, a.ID).Status != runs.StatusCancelled {
			t.Fatalf("after the decisions: a %s, b %s", c.get(t, a.ID).Status, st)
		}
		if es := c.inbox(t); len(es) != 0 {
			t.Fatalf("decided entries still listed: %v", es)
		}
	})
}

// fillTight pads item pk of table until the engine refuses even one byte
// more.
func fillTight(t *testing.T, c *dynamodb.Client, table, pk string) {
	t.Helper()
	fill(t, c, table, pk)
	n := 0
	for _, size := range []int{10, 1} {
		for {
			_, err := c.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
				TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
				UpdateExpression:          aws.String("SET #p = :p"),
				ExpressionAttributeNames:  map[string]string{"#p": fmt.Sprintf("tight%d", n)},
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: strings.Repeat("p", size)}},
			})
			if err != nil {
				break
			}
			n++
		}
	}
}

// TestOneCallerCannotFillTheInboxOthersShare: under the commerce policy
// each caller (namespace and worker) of a tenant holds at most its share
// of the tenant's inbox (inbox.Config.MaxPerCaller; 2 here): its next
// stale write is refused as stale all the same, without an inboxId, while
// another caller's stale write is still kept; and once it decides one of
// its entries, its next is kept again.
func TestOneCallerCannotFillTheInboxOthersShare(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client(dynamotest.FastRetries)
		rs := &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
		st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
		if err != nil {
			t.Fatal(err)
		}
		ib, err := inbox.NewDynamo(inbox.DynamoConfig{Client: c, Table: rs.Table, Config: inbox.Config{MaxPerCaller: 2}})
		if err != nil {
			t.Fatal(err)
		}
		h := &commerceHost{f: hostOf(t, rs, idem.Config{Policy: commerce.Policy, Store: st}, func(_ *fixture, cfg *Config) { cfg.Inbox = ib }), runs: rs}
		// stale sends a stale cancel of worker's; it returns the refusal's
		// inboxId ("" when not kept).
		stale := func(worker, key string) string {
			run := h.run(t, runs.StatusRunning)
			req := decidedCancel(run.ID, 1, key)
			req.RequestContext.Authorizer.Lambda["worker"] = worker
			r, m := h.f.do(t, req)
			if r.StatusCode != 409 || m["error"] != decided.CodeStale {
				t.Fatalf("%s: %d %s", key, r.StatusCode, r.Body)
			}
			d, _ := m["details"].(map[string]any)
			id, _ := d["inboxId"].(string)
			return id
		}
		first := stale("checkout", "checkout 1")
		stale("checkout", "checkout 2")
		if id := stale("checkout", "checkout 3"); id != "" {
			t.Fatalf("a caller's write past its share was kept: %s", id)
		}
		if stale("packing", "packing 1") == "" {
			t.Fatal("another caller's stale write was not kept")
		}
		if r, _ := h.f.do(t, commerceReq("POST", "/inbox/"+first+"/discard", "discard checkout 1")); r.StatusCode != 200 {
			t.Fatalf("discard: %d %s", r.StatusCode, r.Body)
		}
		if stale("checkout", "checkout 4") == "" {
			t.Fatal("a caller's write after it decided an entry was not kept")
		}
	})
}
