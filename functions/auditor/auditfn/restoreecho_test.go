package auditfn

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
)

// The auditor's write-back of a completed effect record over the other
// region's claim is, in its own region's stream and in the other's, a
// change from that claim to the record's whole history: an attempt that
// escaped before it completed, and a higher attempt than the claim's. The
// escape and the reclaim were counted when that history was written (by
// every region's auditor); read off the write-back, they would page as a
// new escape and a new reclaim in both regions. The write-back's change
// (marked with the claim's owner) counts neither, nor a conflict.
func TestEffectWriteBackCountsNoEscapeOrReclaimAgain(t *testing.T) {
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	img := func(r *ledger.Record) map[string]types.AttributeValue {
		m, err := ledgerdynamo.EncodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	completed := &ledger.Record{Key: "effect#e-written-back", EffectID: "e-written-back", State: ledger.StateCompleted, Owner: "owner-eu", Attempt: 2,
		CreatedAt: t0, UpdatedAt: t0.Add(2 * time.Minute), ExpiresAt: t0.Add(ledger.MinRetention), LeaseUntil: t0.Add(2 * time.Minute),
		Attempts: []ledger.Attempt{{N: 1, State: ledger.AttemptEscaped, At: t0.Add(time.Minute), Fired: true, FiredAt: t0},
			{N: 2, State: ledger.AttemptCompleted, At: t0.Add(2 * time.Minute), Fired: true, FiredAt: t0.Add(time.Minute)}}}
	claim := &ledger.Record{Key: "effect#e-written-back", EffectID: "e-written-back", State: ledger.StateFiring, Owner: "owner-us", Attempt: 1,
		CreatedAt: t0.Add(time.Second), UpdatedAt: t0.Add(time.Second), ExpiresAt: t0.Add(ledger.MinRetention), LeaseUntil: t0.Add(31 * time.Second),
		Attempts: []ledger.Attempt{{N: 1, State: ledger.AttemptClaimed, At: t0.Add(time.Second), Fired: true, FiredAt: t0.Add(time.Second)}}}
	echo := marked(img(completed), claim.Owner)
	a := reconcilingAuditor(t, nil, func() time.Time { return t0.Add(time.Hour) })
	c := a.Audit(context.Background(), []stream.StreamRecord{{EventName: "MODIFY", EventID: "1", OldImage: img(claim), NewImage: echo}})
	if c.Escaped[TableEffects] != 0 || c.Reclaims[TableEffects] != 0 || c.Conflicts != 0 {
		t.Fatalf("the write-back's change counted escaped %d, reclaims %d, conflicts %d; want none", c.Escaped[TableEffects], c.Reclaims[TableEffects], c.Conflicts)
	}
	// The same change unmarked (the other region's own completion
	// replicated over this claim) is counted as before.
	c = a.Audit(context.Background(), []stream.StreamRecord{{EventName: "MODIFY", EventID: "1", OldImage: img(claim), NewImage: img(completed)}})
	if c.Escaped[TableEffects] != 1 || c.Conflicts != 1 {
		t.Fatalf("unmarked: escaped %d, conflicts %d; want 1 and 1", c.Escaped[TableEffects], c.Conflicts)
	}
}

// A record written back where the other region's TTL deleted it
// (effectDeleted) is an INSERT, in its region's stream and in the other's:
// the escape in its history was counted when it was written, and is not
// counted again.
func TestEffectRecordWrittenBackAfterADeletionCountsNoEscapeAgain(t *testing.T) {
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	rec := &ledger.Record{Key: "effect#e-deleted", EffectID: "e-deleted", State: ledger.StateCompleted, Owner: "owner-eu", Attempt: 2,
		CreatedAt: t0, UpdatedAt: t0.Add(2 * time.Minute), ExpiresAt: t0.Add(ledger.MinRetention), LeaseUntil: t0.Add(2 * time.Minute),
		Attempts: []ledger.Attempt{{N: 1, State: ledger.AttemptEscaped, At: t0.Add(time.Minute), Fired: true, FiredAt: t0},
			{N: 2, State: ledger.AttemptCompleted, At: t0.Add(2 * time.Minute), Fired: true, FiredAt: t0.Add(time.Minute)}}}
	m, err := ledgerdynamo.EncodeRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	a := reconcilingAuditor(t, nil, func() time.Time { return t0.Add(time.Hour) })
	if c := a.Audit(context.Background(), []stream.StreamRecord{{EventName: "INSERT", EventID: "1", NewImage: marked(m, "")}}); c.Escaped[TableEffects] != 0 {
		t.Fatalf("the write-back's INSERT counted %d escapes; want none", c.Escaped[TableEffects])
	}
	if c := a.Audit(context.Background(), []stream.StreamRecord{{EventName: "INSERT", EventID: "1", NewImage: m}}); c.Escaped[TableEffects] != 1 {
		t.Fatalf("an unmarked INSERT counted %d escapes; want 1", c.Escaped[TableEffects])
	}
}

// A hold's write-back (the other region's pending claim over a record
// naming a run) raises the attempt the item shows when the record was
// taken over once in its region: the change, from the pending claim to the
// written-back record, is no reclaim, and the write-back is marked so.
func TestHoldWriteBackIsNoReclaim(t *testing.T) {
	pending := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "caller:v1:x"},
		"state": &types.AttributeValueMemberS{Value: "pending"}, "attempt": &types.AttributeValueMemberN{Value: "1"}}
	record := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "caller:v1:x"},
		"state": &types.AttributeValueMemberS{Value: "completed"}, "attempt": &types.AttributeValueMemberN{Value: "2"}}
	a := reconcilingAuditor(t, nil, time.Now)
	if c := a.Audit(context.Background(), []stream.StreamRecord{{EventName: "MODIFY", EventID: "1", OldImage: pending, NewImage: marked(record, "")}}); c.Reclaims[TableIdempotency] != 0 {
		t.Fatalf("the hold's write-back counted %d reclaims; want none", c.Reclaims[TableIdempotency])
	}
	if c := a.Audit(context.Background(), []stream.StreamRecord{{EventName: "MODIFY", EventID: "1", OldImage: pending, NewImage: record}}); c.Reclaims[TableIdempotency] != 1 {
		t.Fatalf("unmarked: %d reclaims; want 1", c.Reclaims[TableIdempotency])
	}
}

// A live effect claim the other region's TTL deleted is written back
// (effectDeleted), and its deletion is no expired unfinished claim: not
// counted in ttl_expired_pending (whose alarm pages), as this region's
// own TTL deletion of an expired claim is.
func TestLiveClaimDeletedByTheOtherRegionsTTLIsNoExpiredClaim(t *testing.T) {
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	claim := &ledger.Record{Key: "effect#e-live-claim", EffectID: "e-live-claim", State: ledger.StateFiring, Owner: "owner-eu", Attempt: 1,
		CreatedAt: t0, UpdatedAt: t0, ExpiresAt: t0.Add(ledger.MinRetention), LeaseUntil: t0.Add(30 * time.Second),
		Attempts: []ledger.Attempt{{N: 1, State: ledger.AttemptClaimed, At: t0, Fired: true, FiredAt: t0}}}
	m, err := ledgerdynamo.EncodeRecord(claim)
	if err != nil {
		t.Fatal(err)
	}
	remove := func(now time.Time) Counts {
		r := &countingRestorer{}
		a := reconcilingAuditor(t, nil, func() time.Time { return now })
		a.RestoreEffects = r
		return a.Audit(context.Background(), []stream.StreamRecord{{EventName: "REMOVE", EventID: "1", OldImage: m, Created: now,
			PrincipalID: stream.TTLPrincipal, IdentityType: "Service"}})
	}
	if c := remove(t0.Add(time.Second)); c.RestoredEffects != 1 || c.TTLExpiredPending[TableEffects] != 0 {
		t.Fatalf("the other region's TTL deleting a live claim: restored %d, ttl_expired_pending %d; want 1 and 0", c.RestoredEffects, c.TTLExpiredPending[TableEffects])
	}
	if c := remove(t0.Add(ledger.MinRetention + time.Hour)); c.RestoredEffects != 0 || c.TTLExpiredPending[TableEffects] != 1 {
		t.Fatalf("this region's TTL deleting the expired claim: restored %d, ttl_expired_pending %d; want 0 and 1", c.RestoredEffects, c.TTLExpiredPending[TableEffects])
	}
}
