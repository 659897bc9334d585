package auditfn

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/keyhash"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
)

// writes is a KeyRestorer whose every write lands.
type writes struct{ n int }

func (w *writes) Restore(context.Context, map[string]types.AttributeValue, map[string]types.AttributeValue) (bool, map[string]types.AttributeValue, error) {
	w.n++
	return true, nil, nil
}

// conflictLines returns the cross_region_conflict lines of a JSON log.
func conflictLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !strings.Contains(line, `"msg":"cross_region_conflict"`) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// A conflict event's winner is the record the replicas keep (RED_TEAM 504):
// where the auditor writes this region's completed effect record back over
// the other region's claim, both regions end on the completed record, and
// the event names it the winner and the claim written over the loser. It
// named them the other way round (winner: the claim, which no region
// keeps).
func TestWrittenBackEffectConflictNamesTheCompletedRecordItsWinner(t *testing.T) {
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	img := func(r *ledger.Record) map[string]types.AttributeValue {
		m, err := ledgerdynamo.EncodeRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	completed := &ledger.Record{Key: "effect#e-winner", EffectID: "e-winner", State: ledger.StateCompleted, Owner: "owner-eu", Attempt: 1,
		CreatedAt: t0, UpdatedAt: t0.Add(time.Minute), ExpiresAt: t0.Add(ledger.MinRetention), LeaseUntil: t0.Add(time.Minute),
		Attempts: []ledger.Attempt{{N: 1, State: ledger.AttemptCompleted, At: t0.Add(time.Minute), Fired: true, FiredAt: t0}}}
	claim := &ledger.Record{Key: "effect#e-winner", EffectID: "e-winner", State: ledger.StateReleased, Owner: "owner-us", Attempt: 1,
		CreatedAt: t0.Add(time.Second), UpdatedAt: t0.Add(2 * time.Second), ExpiresAt: t0.Add(ledger.MinRetention), LeaseUntil: t0.Add(2 * time.Second),
		Attempts: []ledger.Attempt{{N: 1, State: ledger.AttemptReleased, At: t0.Add(2 * time.Second)}}}
	for _, restores := range []bool{true, false} {
		t.Run(fmt.Sprintf("written back %v", restores), func(t *testing.T) {
			var logs bytes.Buffer
			ca, err := conflictaudit.New(conflictaudit.Config{Strategy: fence.ReconciledRecords, Region: "eu-west-1",
				Log: slog.New(slog.NewJSONHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			w := &writes{}
			a := &Auditor{Conflicts: ca, Now: func() time.Time { return t0.Add(time.Hour) }, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
			if restores {
				a.RestoreEffects = w
			}
			c := a.Audit(context.Background(), []stream.StreamRecord{{EventName: "MODIFY", EventID: "1", OldImage: img(completed), NewImage: img(claim)}})
			if c.Conflicts != 1 || c.RestoredEffects != w.n || (w.n == 1) != restores {
				t.Fatalf("conflicts %d, written back %d (restorer writes %d)", c.Conflicts, c.RestoredEffects, w.n)
			}
			ev := conflictLines(t, logs.String())
			if len(ev) != 1 {
				t.Fatalf("%d events:\n%s", len(ev), logs.String())
			}
			kept, over := completed, claim // written back: both regions keep the completed record
			if !restores {
				kept, over = claim, completed // replication's write stands
			}
			winner, loser := ev[0]["winner"].(map[string]any), ev[0]["loser"].(map[string]any)
			if winner["owner"] != keyhash.Log(kept.Owner) || winner["state"] != string(kept.State) ||
				loser["owner"] != keyhash.Log(over.Owner) || loser["state"] != string(over.State) {
				t.Fatalf("event names winner %v and loser %v; the record kept is %s's (%s)", winner, loser, kept.Owner, kept.State)
			}
		})
	}
}

// A Layer-1 conflict event states what happened to the record (RED_TEAM
// 505): with no write-back (under fenced-effects, where the auditor has no
// table to write and a conflict means a region wrote its own replica; or
// reconciled-records without IDEMPOTENCY_TABLE) the record keeps the run
// replication delivered, so that run is the winner, nothing is restored,
// and the event names no rule that was not applied. It said the lower run
// won and was restored ("restore": true, "resolution":
// "lexicographic-min-run-id") while every region kept the higher.
func TestLayer1ConflictWithoutAWriteBackNamesTheRunKept(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	id := keyspace.ID("tenant:acme", "POST /runs", "no-write-back-key-0123456789")
	var imgs [2]map[string]types.AttributeValue
	for j, run := range []string{"acme/run-a", "acme/run-z"} {
		table, st := newIdemTable(t, e)
		req := fmt.Sprintf("req-%d", j)
		res, err := st.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "owner-" + req, RequestID: req,
			LeaseExpires: t0.Add(time.Minute), Expires: t0.Add(time.Hour)}, t0)
		if err != nil || res.Decision != idem.Claimed {
			t.Fatalf("claim: %+v %v", res, err)
		}
		if err := st.Complete(ctx, res.Record, idem.Outcome{State: idem.StateCompleted, Expires: t0.Add(time.Hour),
			Response: &idem.Response{Status: 201, Body: []byte(`{"runId":"` + run + `"}`)}}, t0); err != nil {
			t.Fatal(err)
		}
		imgs[j] = scanOne(t, ctx, e, table)
	}
	for _, posture := range []string{"fenced-effects", "reconciled-records"} {
		t.Run(posture, func(t *testing.T) {
			var lb, mb bytes.Buffer
			env := map[string]string{"CROSS_REGION": posture, EnvRegion: "eu-west-1"}
			a, err := NewFromEnv(func(k string) string { return env[k] }, emf.New(&mb, "idemkit"), slog.New(slog.NewJSONHandler(&lb, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if a.Restore != nil {
				t.Fatal("NewFromEnv set a restorer")
			}
			a.Now = func() time.Time { return t0 }
			// This region's record named run-a; the other region's,
			// naming run-z, replicated over it.
			c := a.Audit(ctx, []stream.StreamRecord{{EventName: "MODIFY", EventID: "1", OldImage: imgs[0], NewImage: imgs[1]}})
			if c.Conflicts != 1 || c.Restored != 0 {
				t.Fatalf("conflicts %d, restored %d", c.Conflicts, c.Restored)
			}
			ev := conflictLines(t, lb.String())
			if len(ev) != 1 {
				t.Fatalf("%d events:\n%s", len(ev), lb.String())
			}
			got := ev[0]
			if w, l := got["winner"].(map[string]any)["run"], got["loser"].(map[string]any)["run"]; w != "acme/run-z" || l != "acme/run-a" {
				t.Errorf("winner %v, loser %v; the record kept names acme/run-z", w, l)
			}
			if got["restore"] != false || got["resolution"] == conflictaudit.PartitionRecoveryLexMin {
				t.Errorf("restore %v, resolution %v: nothing was written back, no rule applied", got["restore"], got["resolution"])
			}
			if got["strategy"] != posture {
				t.Errorf("strategy %v", got["strategy"])
			}
		})
	}
}
