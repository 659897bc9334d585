package regionsim_test

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/regionsim"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestReplicatorDeletionOfAnAbsentItemLeavesNoEcho: a replicated deletion
// of an item the receiving region no longer holds (both regions deleted it
// during a partition, as TTL does in each replica of an expired item)
// deletes nothing there, and DynamoDB writes no stream record for it. The
// replicator must not wait for an echo of it: the next deletion made in
// that region, of another item, is a local write and replicates. So must a
// deletion whose claim was merged away (Coalesce: the other region sees
// the deletion alone, of an item it never held).
func TestReplicatorDeletionOfAnAbsentItemLeavesNoEcho(t *testing.T) {
	for _, coalesce := range []bool{false, true} {
		name := "every write"
		if coalesce {
			name = "coalesced"
		}
		t.Run(name, func(t *testing.T) {
			p := newPair(t, "IdempotencyTable")
			clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
			rep, err := regionsim.New(regionsim.Config{A: p.region(eu), B: p.region(us), Lag: time.Second, Now: clock.Now, Coalesce: coalesce})
			if err != nil {
				t.Fatal(err)
			}
			key := func(k string) map[string]types.AttributeValue { return map[string]types.AttributeValue{"pk": s(k)} }
			put := func(r, k string) {
				item := key(k)
				item["v"] = s(r)
				if _, err := p.db(r).PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(p.tables[r]), Item: item}); err != nil {
					t.Fatal(err)
				}
			}
			del := func(r, k string) {
				if _, err := p.db(r).DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(p.tables[r]), Key: key(k)}); err != nil {
					t.Fatal(err)
				}
			}
			step := func() {
				if _, err := rep.Step(ctx(t)); err != nil {
					t.Fatal(err)
				}
				clock.Advance(10 * time.Millisecond)
			}
			sync := func() {
				clock.Advance(2 * time.Second)
				if err := rep.Sync(ctx(t)); err != nil {
					t.Fatal(err)
				}
			}
			put(eu, "shared")
			put(eu, "later")
			step()
			sync()
			if coalesce {
				// us claims a key and deletes it, merged into the
				// deletion alone: eu never held that item.
				put(us, "forgotten")
				step()
				del(us, "forgotten")
				step()
			} else {
				// Both regions delete one item during a partition.
				rep.SetPartitioned(true)
				del(eu, "shared")
				step()
				del(us, "shared")
				step()
				rep.SetPartitioned(false)
			}
			sync()
			// eu's next deletion, of another item, must reach us.
			del(eu, "later")
			step()
			sync()
			if it := get(t, p.db(us), p.tables[us], key("later")); it != nil {
				t.Fatalf("us still holds %q after eu deleted it: the replicator took eu's deletion for the echo of its own apply", it["pk"].(*types.AttributeValueMemberS).Value)
			}
		})
	}
}
