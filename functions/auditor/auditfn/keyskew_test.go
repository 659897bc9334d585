package auditfn

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger/fence"
)

type countingRestorer struct{ n int }

func (c *countingRestorer) Restore(context.Context, map[string]types.AttributeValue, map[string]types.AttributeValue) (bool, map[string]types.AttributeValue, error) {
	c.n++
	return true, nil, nil
}

// A key claimed again after its record's retention ended is a new key's
// claim, not a rival region's, even when the auditor's clock is behind the
// clock of the request that claimed it: the old record's expiry is judged
// at the new claim's own time (its lease write), not only at the
// auditor's, so the new claim is neither held nor overwritten. A rival
// claim made while the old record was live is still held.
func TestKeyClaimedAfterRetentionIsNotHeldWhateverTheAuditorsClock(t *testing.T) {
	k := expiredKey(t, "skewed-key-0123456789abcdef")
	e, ctx, t0, id, item, claim, old, later := k.e, k.ctx, k.t0, k.id, k.item, k.claim, k.old, k.later
	claim("req-2", later)
	cur := item()
	for _, skew := range []time.Duration{0, -time.Minute} {
		r := &countingRestorer{}
		a := reconcilingAuditor(t, r, func() time.Time { return later.Add(skew) })
		c := a.Audit(ctx, []stream.StreamRecord{{EventName: "MODIFY", OldImage: old, NewImage: cur}})
		if r.n != 0 || c.Restored != 0 || c.Conflicts != 0 {
			t.Fatalf("auditor clock %v from the new claim's: %d restores, %d conflicts; the new claim was taken for a rival's", skew, r.n, c.Conflicts)
		}
	}
	// A rival claim while the first record is live (another region's
	// replica, where the key was absent) is held as before.
	table2, st2 := newIdemTable(t, e)
	if res, err := st2.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "owner-rival", RequestID: "req-rival",
		LeaseExpires: t0.Add(2 * time.Minute), Expires: t0.Add(time.Hour + time.Minute)}, t0.Add(time.Minute)); err != nil || res.Decision != idem.Claimed {
		t.Fatalf("rival claim: %+v %v", res, err)
	}
	rivalItem := scanOne(t, ctx, e, table2)
	for _, skew := range []time.Duration{0, time.Hour} { // the auditor late, even past the first record's retention
		r := &countingRestorer{}
		ca, _ := conflictaudit.New(conflictaudit.Config{Strategy: fence.ReconciledRecords, Region: "eu-west-1"})
		a := &Auditor{Conflicts: ca, Restore: r, Now: func() time.Time { return t0.Add(time.Minute + skew/2) },
			Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
		if a.Audit(ctx, []stream.StreamRecord{{EventName: "MODIFY", OldImage: old, NewImage: rivalItem}}); r.n != 1 {
			t.Fatalf("auditor %v late: the rival claim over a live record was not held (%d restores)", skew/2, r.n)
		}
	}
}

// A held rival claim (another region's pending claim over a record naming
// a run) that ended without a run before the restore reached the replica
// (released after a failed execution) is still restored over: the record
// naming the run is the key's only answer, and without it the key's next
// retry would create a second run. The restore is conditional on the
// released claim as the failed write found it.
func TestHeldClaimReleasedBeforeTheRestoreIsRestoredOver(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	id := keyspace.ID("tenant:acme", "POST /runs", "released-rival-0123456789abc")
	scan := func(table string) map[string]types.AttributeValue { return scanOne(t, ctx, e, table) }
	home, st := newIdemTable(t, e)
	completedByReq1(t, ctx, st, id, "acme/run-1", t0)
	old := scan(home)
	replica, st2 := newIdemTable(t, e)
	rival, err := st2.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "owner-rival", RequestID: "req-rival",
		LeaseExpires: t0.Add(2 * time.Minute), Expires: t0.Add(time.Hour + time.Minute)}, t0.Add(time.Minute))
	if err != nil || rival.Decision != idem.Claimed {
		t.Fatalf("rival claim: %+v %v", rival, err)
	}
	cur := scan(replica)
	if err := st2.Release(ctx, rival.Record, t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	a := reconcilingAuditor(t, TableRestorer{Client: e.Client(), Table: replica}, func() time.Time { return t0.Add(time.Minute) })
	c := a.Audit(ctx, []stream.StreamRecord{{EventName: "MODIFY", OldImage: old, NewImage: cur}})
	if c.RestoreErr != nil {
		t.Fatal(c.RestoreErr)
	}
	got, err := idemdynamo.DecodeItem(scan(replica))
	if err != nil {
		t.Fatal(err)
	}
	if c.Restored != 1 || got.RequestID != "req-1" || got.State != idem.StateCompleted {
		t.Fatalf("restored %d; the replica holds %s %s (request %s), want the completed record of req-1 (its run's)", c.Restored, got.State, got.Owner, got.RequestID)
	}
	if !writtenBack(scan(replica)) {
		t.Fatal("the write-back over the held claim is not marked as the auditor's")
	}
}

// A held rival claim (another region's pending claim over a record naming
// a run) that was taken over in its own region before the restore reached
// the replica (its lease ended there: a crashed request, and a retry of the
// key took it over under a new owner, keeping its request id) is the same
// rival claim, its run still not known: the record naming the run is
// restored over it, conditional on the takeover as the failed write found
// it. Where the takeover completed naming a run first, the two runs are
// compared: restored over only where the old record's run is the lower.
func TestHeldClaimTakenOverBeforeTheRestoreIsStillHeld(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	scan := func(table string) map[string]types.AttributeValue { return scanOne(t, ctx, e, table) }
	for _, tc := range []struct {
		name       string
		takeover   string // the run the takeover's completion names; "" while it runs
		wantRun    string // the run the replica ends on
		wantEvents int
	}{
		{"takeover still running", "", "acme/run-m", 0},
		{"takeover completed naming a higher run", "acme/run-z", "acme/run-m", 1},
		{"takeover completed naming a lower run", "acme/run-a", "acme/run-a", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := keyspace.ID("tenant:acme", "POST /runs", "taken-over-rival-"+tc.name)
			home, st := newIdemTable(t, e)
			completedByReq1(t, ctx, st, id, "acme/run-m", t0)
			old := scan(home)
			replica, st2 := newIdemTable(t, e)
			t1 := t0.Add(time.Minute)
			rival, err := st2.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "owner-rival", RequestID: "req-rival",
				LeaseExpires: t1.Add(time.Minute), Expires: t1.Add(time.Hour)}, t1)
			if err != nil || rival.Decision != idem.Claimed {
				t.Fatalf("rival claim: %+v %v", rival, err)
			}
			cur := scan(replica)
			// The rival's request stops; after its lease a retry in its
			// region takes the claim over.
			t2 := t1.Add(2 * time.Minute)
			taken, err := st2.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "owner-takeover", RequestID: "req-retry",
				LeaseExpires: t2.Add(time.Minute), Expires: t2.Add(time.Hour)}, t2)
			if err != nil || taken.Decision != idem.Reclaimed || taken.Record.RequestID != "req-rival" {
				t.Fatalf("takeover: %+v %v", taken, err)
			}
			if tc.takeover != "" {
				if err := st2.Complete(ctx, taken.Record, idem.Outcome{State: idem.StateCompleted, Expires: t2.Add(time.Hour),
					Response: &idem.Response{Status: 201, Body: []byte(`{"runId":"` + tc.takeover + `"}`)}}, t2); err != nil {
					t.Fatal(err)
				}
			}
			a := reconcilingAuditor(t, TableRestorer{Client: e.Client(), Table: replica}, func() time.Time { return t2 })
			c := a.Audit(ctx, []stream.StreamRecord{{EventName: "MODIFY", OldImage: old, NewImage: cur}})
			if c.RestoreErr != nil {
				t.Fatal(c.RestoreErr)
			}
			got, err := idemdynamo.DecodeItem(scan(replica))
			if err != nil {
				t.Fatal(err)
			}
			if k := keyRecord(got, t2); k.Run != tc.wantRun || got.State != idem.StateCompleted || c.Conflicts != tc.wantEvents {
				t.Fatalf("the replica holds %s naming %q (request %s, owner %s), %d conflict events; want the record naming %s, %d events",
					got.State, k.Run, got.RequestID, got.Owner, c.Conflicts, tc.wantRun, tc.wantEvents)
			}
		})
	}
}

// A record naming a run deleted by a REMOVE that TTL did not make (under
// reconciled-records: the other region's claim of the key, deleted there
// because its answer is forgotten, whose deletion replicated here without
// its claim) is written back where the replica holds no item: it is the
// key's only run; so is one a TTL deletion removed within its retention
// (the other region's TTL, which deleted an older, expired item of the
// key there). Not an expired record (this region's own TTL), and not
// over an item the replica holds (a new claim, or the record written back
// already: the change delivered again).
func TestRecordDeletedByTheOtherRegionsClaimIsWrittenBack(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	table, st := newIdemTable(t, e)
	id := keyspace.ID("tenant:acme", "POST /runs", "deleted-by-a-forgotten-claim-0123")
	completedByReq1(t, ctx, st, id, "acme/run-1", t0)
	old := scanOne(t, ctx, e, table)
	del := func() {
		if _, err := e.Client().DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"pk": old["pk"]}}); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		out, err := e.Client().Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Items)
	}
	audit := func(rec stream.StreamRecord, now time.Time) Counts {
		a := reconcilingAuditor(t, TableRestorer{Client: e.Client(), Table: table}, func() time.Time { return now })
		c := a.Audit(ctx, []stream.StreamRecord{rec})
		if c.RestoreErr != nil {
			t.Fatal(c.RestoreErr)
		}
		return c
	}
	remove := stream.StreamRecord{EventName: "REMOVE", Keys: map[string]types.AttributeValue{"pk": old["pk"]}, OldImage: old}
	ttl := remove
	ttl.PrincipalID, ttl.IdentityType = stream.TTLPrincipal, "Service"

	// This region's TTL deletes the record once expired (DynamoDB's clock
	// at the deletion, whatever the auditor's).
	ttlExpired := ttl
	ttlExpired.Created = t0.Add(2 * time.Hour)
	del()
	if c := audit(ttl, t0.Add(2*time.Hour)); c.Restored != 0 || count() != 0 {
		t.Fatalf("this region's TTL deletion of the expired record was written back (%d)", c.Restored)
	}
	if c := audit(ttlExpired, t0.Add(time.Minute)); c.Restored != 0 || count() != 0 {
		t.Fatalf("this region's TTL deletion, read on a clock behind, was written back (%d)", c.Restored)
	}
	if c := audit(remove, t0.Add(2*time.Hour)); c.Restored != 0 || count() != 0 {
		t.Fatalf("a record past its retention was written back (%d)", c.Restored)
	}
	if c := audit(remove, t0.Add(time.Minute)); c.Restored != 1 || count() != 1 {
		t.Fatalf("the deleted record naming the key's run: written back %d, %d items; want 1, 1", c.Restored, count())
	}
	// A TTL deletion of the record within its retention is the other
	// region's TTL deleting an older, expired item of the key, replicated
	// here as the key's newest write: the record is written back too.
	del()
	if c := audit(ttl, t0.Add(time.Minute)); c.Restored != 1 || count() != 1 {
		t.Fatalf("the record deleted by the other region's TTL: written back %d, %d items; want 1, 1", c.Restored, count())
	}
	if c := audit(remove, t0.Add(time.Minute)); c.Restored != 0 || count() != 1 {
		t.Fatalf("delivered again: written back %d; want 0 (the replica holds it)", c.Restored)
	}
}

// The key is free in a region from the moment the other region's deletion
// of its record arrives until the auditor writes the record back: a
// request of the key in that window claims it anew. That claim is held as
// a rival region's is: the record is written over it while it is pending
// (its completion, and the run written with it, then refused), and
// compared with it once it named a run: written back only where the
// deleted record names the lower run, a conflict either way.
func TestRecordDeletedWhileTheKeyWasClaimedAgainIsHeld(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		again      string // the run the new claim's completion names; "" while it runs
		wantRun    string
		wantEvents int
	}{
		{"claimed again, still running", "", "acme/run-m", 0},
		{"claimed again, completed naming a higher run", "acme/run-z", "acme/run-m", 1},
		{"claimed again, completed naming a lower run", "acme/run-a", "acme/run-a", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table, st := newIdemTable(t, e)
			id := keyspace.ID("tenant:acme", "POST /runs", "deleted-then-claimed-"+tc.name)
			claim := func(req string, at time.Time) idem.Record {
				res, err := st.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "owner-" + req, RequestID: req,
					LeaseExpires: at.Add(time.Minute), Expires: at.Add(time.Hour)}, at)
				if err != nil || res.Decision != idem.Claimed {
					t.Fatalf("claim %s: %+v %v", req, res, err)
				}
				return res.Record
			}
			complete := func(rec idem.Record, run string, at time.Time) {
				if err := st.Complete(ctx, rec, idem.Outcome{State: idem.StateCompleted, Expires: at.Add(time.Hour),
					Response: &idem.Response{Status: 201, Body: []byte(`{"runId":"` + run + `"}`)}}, at); err != nil {
					t.Fatal(err)
				}
			}
			scan := func() map[string]types.AttributeValue { return scanOne(t, ctx, e, table) }
			complete(claim("req-1", t0), "acme/run-m", t0)
			old := scan()
			if _, err := e.Client().DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
				Key: map[string]types.AttributeValue{"pk": old["pk"]}}); err != nil {
				t.Fatal(err)
			}
			t1 := t0.Add(time.Minute)
			again := claim("req-again", t1)
			if tc.again != "" {
				complete(again, tc.again, t1)
			}
			a := reconcilingAuditor(t, TableRestorer{Client: e.Client(), Table: table}, func() time.Time { return t1 })
			c := a.Audit(ctx, []stream.StreamRecord{{EventName: "REMOVE", Keys: map[string]types.AttributeValue{"pk": old["pk"]}, OldImage: old}})
			if c.RestoreErr != nil {
				t.Fatal(c.RestoreErr)
			}
			got, err := idemdynamo.DecodeItem(scan())
			if err != nil {
				t.Fatal(err)
			}
			if k := keyRecord(got, t1); k.Run != tc.wantRun || got.State != idem.StateCompleted || c.Conflicts != tc.wantEvents {
				t.Fatalf("the replica holds %s naming %q (request %s), %d conflict events; want the record naming %s, %d events",
					got.State, k.Run, got.RequestID, c.Conflicts, tc.wantRun, tc.wantEvents)
			}
		})
	}
}

// newIdemTable creates an idempotency table on e and a Layer-1 store over it.
func newIdemTable(t testing.TB, e *dynamotest.Emulator) (string, *idemdynamo.Store) {
	t.Helper()
	table := e.CreateTable(t, "IdempotencyTable")
	st, err := idemdynamo.New(idemdynamo.Config{Client: e.Client(), Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return table, st
}

// completedByReq1 claims id as req-1 (owner-1) at t0 and completes it
// naming run, retained for an hour.
func completedByReq1(t testing.TB, ctx context.Context, st *idemdynamo.Store, id string, run string, t0 time.Time) {
	t.Helper()
	res, err := st.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "owner-1", RequestID: "req-1",
		LeaseExpires: t0.Add(time.Minute), Expires: t0.Add(time.Hour)}, t0)
	if err != nil || res.Decision != idem.Claimed {
		t.Fatalf("claim: %+v %v", res, err)
	}
	if err := st.Complete(ctx, res.Record, idem.Outcome{State: idem.StateCompleted, Expires: t0.Add(time.Hour),
		Response: &idem.Response{Status: 201, Body: []byte(`{"runId":"` + run + `"}`)}}, t0); err != nil {
		t.Fatal(err)
	}
}

// scanOne reads table's only item.
func scanOne(t testing.TB, ctx context.Context, e *dynamotest.Emulator, table string) map[string]types.AttributeValue {
	t.Helper()
	out, err := e.Client().Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil || len(out.Items) != 1 {
		t.Fatalf("scan: %v, %d items", err, len(out.Items))
	}
	return out.Items[0]
}

// reconcilingAuditor is an auditor of eu-west-1 under reconciled-records,
// restoring with r, its clock now, logging nowhere.
func reconcilingAuditor(t testing.TB, r KeyRestorer, now func() time.Time) *Auditor {
	t.Helper()
	ca, err := conflictaudit.New(conflictaudit.Config{Strategy: fence.ReconciledRecords, Region: "eu-west-1"})
	if err != nil {
		t.Fatal(err)
	}
	return &Auditor{Conflicts: ca, Restore: r, Now: now, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
}

// claimOrReclaim claims id as req (owner "owner-"+req) at now, a minute's
// lease, retained for an hour, and wants it claimed or reclaimed.
func claimOrReclaim(t testing.TB, ctx context.Context, st *idemdynamo.Store, id, req string, now time.Time) idem.Record {
	t.Helper()
	res, err := st.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "owner-" + req, RequestID: req,
		LeaseExpires: now.Add(time.Minute), Expires: now.Add(time.Hour)}, now)
	if err != nil || (res.Decision != idem.Claimed && res.Decision != idem.Reclaimed) {
		t.Fatalf("claim %s: %+v %v", req, res, err)
	}
	return res.Record
}

// expiredKeyRig is a key answered 201 at t0 on a moto idempotency table,
// its record read back (old), and the time its retention has ended
// (later): the start of the tests of a key claimed again after retention.
type expiredKeyRig struct {
	e     *dynamotest.Emulator
	ctx   context.Context
	table string
	st    *idemdynamo.Store
	t0    time.Time
	id    string
	item  func() map[string]types.AttributeValue
	claim func(req string, now time.Time) idem.Record
	old   map[string]types.AttributeValue
	later time.Time
}

func expiredKey(t *testing.T, key string) expiredKeyRig {
	t.Helper()
	k := expiredKeyRig{e: dynamotest.Start(t, dynamotest.Moto), ctx: context.Background()}
	k.table, k.st = newIdemTable(t, k.e)
	k.t0 = time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	k.id = keyspace.ID("tenant:acme", "POST /runs", key)
	k.item = func() map[string]types.AttributeValue { return scanOne(t, k.ctx, k.e, k.table) }
	k.claim = func(req string, now time.Time) idem.Record { return claimOrReclaim(t, k.ctx, k.st, k.id, req, now) }
	first := k.claim("req-1", k.t0)
	if err := k.st.Complete(k.ctx, first, idem.Outcome{State: idem.StateCompleted, Expires: k.t0.Add(time.Hour),
		Response: &idem.Response{Status: 201, Body: []byte(`{"runId":"acme/run-1"}`)}}, k.t0); err != nil {
		t.Fatal(err)
	}
	k.old = k.item()
	k.later = k.t0.Add(time.Hour + time.Second) // the first record's retention has ended
	return k
}
