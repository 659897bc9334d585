package sweeper_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/sweeper"
)

// otherRegion makes, right before the sweeper's DeleteItem of a chosen
// item, the write another region makes to it at once (on base, a client
// without faults), and then has the sweeper's delete refused as an MRSC
// table refuses a write to an item a request in another Region is
// modifying: ReplicatedWriteConflictException, a client fault the SDK's
// standard retryer does not retry.
type otherRegion struct {
	sweeper.API
	f      *dynamotest.Faults
	writes map[string]func(ctx context.Context, key map[string]types.AttributeValue)
}

func (o otherRegion) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if w := o.writes[in.Key["pk"].(*types.AttributeValueMemberS).Value]; w != nil {
		w(ctx, in.Key)
		o.f.FailNext("DeleteItem", 1, &types.ReplicatedWriteConflictException{Message: aws.String("injected: the item is being modified by a request in another Region")})
	}
	return o.API.DeleteItem(ctx, in, opt...)
}

// On an MRSC table (EffectsConsistency=STRONG) a conditional delete that
// meets a write of the same item in another Region at once (that Region's
// reclaim or renewal of an expired record, or the sweeper of a replica
// stack given STRONG deleting it too) is refused with
// ReplicatedWriteConflictException, not with a failed condition. The
// sweeper took it for a DynamoDB failure: the whole table's sweep stopped
// there with an error, the run failed (paging STACK-sweeper-errors) and
// left the rest of the table to the next run; two sweepers of one MRSC
// table, the "harmless" second one included, failed each other's runs.
// It is the race a conditional delete exists for: the item is left (the
// other Region's write decides it; a later run deletes it if it is still
// expired), not counted, and the sweep goes on (RED_TEAM 436).
func TestDeleteRefusedForAWriteInAnotherRegionIsNoFailure(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		base := e.Client()
		f := dynamotest.NewFaults()
		c := e.Client(f.Middleware(), dynamotest.FastRetries)
		table := e.CreateTable(t, "EffectsTable")
		const n = 20
		expired := seed(t, base, table, "EffectsTable", n)
		if !expired["k1"] || !expired["k5"] {
			t.Fatal("seed changed: k1 and k5 must be expired")
		}
		later := now.Add(24 * time.Hour)
		api := otherRegion{API: c, f: f, writes: map[string]func(context.Context, map[string]types.AttributeValue){
			// The other Region reclaims k1: a new retention.
			"k1": func(context.Context, map[string]types.AttributeValue) { put(t, base, table, "EffectsTable", 1, &later) },
			// The other Region's sweeper deletes k5.
			"k5": func(ctx context.Context, k map[string]types.AttributeValue) {
				if _, err := base.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: k}); err != nil {
					t.Error(err)
				}
			},
		}}
		w := &sweeper.Sweeper{API: api, Table: table, KeyAttrs: []string{"pk", "sk"}, PageSize: 4, Concurrency: 1}
		r, err := w.SweepUntil(ctx(t), now, nil)
		if f.Fired() != 2 {
			t.Fatalf("%d conflicts injected, want 2", f.Fired())
		}
		if err != nil || !r.Complete || r.Expired != len(expired) || r.Deleted != len(expired)-2 {
			t.Fatalf("sweep with two deletes refused for another Region's write: %+v, %v; want complete, no error, %d deleted",
				r, err, len(expired)-2)
		}
		delete(expired, "k1") // renewed there: it stays
		checkOnlyExpiredGone(t, base, table, n, expired)
	})
}
