package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/soak"
)

// The engine's loss, told by state, not by time.
//
// DynamoDB Local on disk answers a write before it is safely in its files,
// and a SIGKILL just after can lose it (docs/engines.md). The write that
// completes a run's creation is one TransactWriteItems: the run item and
// the completion of its key's Layer-1 record. When the engine loses that
// write it loses both halves. So a run answered 2xx and missing after
// recovery is counted as lost by the engine only when
//
//   - an engine SIGKILL came after the first request under its key was
//     sent (no write can be lost by a kill that came before it was made),
//     and
//   - the whole transaction is missing: the key's Layer-1 record is absent
//     (or its retention ended) or still pending, never completed.
//
// Every other missing run is a violation: above all a run whose Layer-1
// record is completed naming it (half of one transaction survived), and a
// run no kill came after. How long before the kill the 201 was read is
// reported (the gap), never judged: under load the kill that loses a write
// can come seconds after the answer.

// ackedRun is a run a 2xx of POST /runs named.
type ackedRun struct {
	ID  string
	Key string // the Idempotency-Key it was created under
	// Sent is when the first request under Key was sent (no request
	// under the key, hence no write of its run, came earlier); Acked is
	// when the first 2xx naming the run was read.
	Sent, Acked time.Time
}

// missingVerdict is what a missing run is: the engine's loss, or a
// violation.
type missingVerdict struct {
	Lost bool
	// Kill is the first engine SIGKILL after the run's request was sent
	// (zero: none), and Gap is Kill less Acked: how long after the 201
	// was read the kill came (negative: before it was read).
	Kill time.Time
	Gap  time.Duration
	// Record says what the key's Layer-1 record holds; Completed that it
	// is completed naming the run.
	Record    string
	Completed bool
}

// String is the verdict as a report line.
func (v missingVerdict) String() string {
	kill := "no engine SIGKILL after its request was sent"
	switch {
	case v.Kill.IsZero():
	case v.Gap >= 0:
		kill = fmt.Sprintf("the first engine SIGKILL after its request came %s after its 201 was read", v.Gap.Round(time.Millisecond))
	default:
		kill = fmt.Sprintf("the first engine SIGKILL after its request came %s before its 201 was read", (-v.Gap).Round(time.Millisecond))
	}
	return kill + "; Layer-1 record " + v.Record
}

// classifyMissing classifies r, missing after recovery, from its key's
// Layer-1 record (rec, found: as idem.Store.Get read it after recovery)
// and the times of the engine's SIGKILLs.
func classifyMissing(r ackedRun, rec idem.Record, found bool, kills []time.Time) missingVerdict {
	v := missingVerdict{}
	for _, k := range kills {
		if k.After(r.Sent) && (v.Kill.IsZero() || k.Before(v.Kill)) {
			v.Kill = k
		}
	}
	if !v.Kill.IsZero() {
		v.Gap = v.Kill.Sub(r.Acked)
	}
	whole := false // the whole transaction is missing
	switch {
	case !found:
		v.Record, whole = "absent", true
	case rec.State == idem.StatePending:
		v.Record, whole = "pending (never completed)", true
	default:
		named := ""
		if rec.Response != nil {
			var m struct {
				RunID string `json:"runId"`
			}
			_ = json.Unmarshal(rec.Response.Body, &m)
			named = m.RunID
		}
		switch {
		case rec.State == idem.StateCompleted && named == r.ID:
			v.Record, v.Completed = "completed naming this run (half of one transaction survived)", true
		case named != "":
			v.Record = fmt.Sprintf("%s naming run %s", rec.State, named)
		default:
			v.Record = string(rec.State)
		}
	}
	v.Lost = whole && !v.Kill.IsZero()
	return v
}

// A run can also be lost and created again. When the engine loses the
// completion of a key's Layer-1 record after its claim was safely written,
// the record is left pending; once its lease ends, a later request under
// the key takes it over and, finding no run (the engine lost that too),
// creates the run again under the same id (the id is derived from the
// claim) and answers a fresh 201. The history then shows the key executed
// twice, though the system executed it once on each state the engine kept.
//
// The state tells that case apart from a second execution by idemkit: a
// run's item is written once, conditionally on no item with its id
// existing, with createdAt the time of that write's request. A run whose
// item was created after its first 2xx was read was created again, so the
// item that 2xx acknowledged vanished; idemkit never deletes a run item.
// Such a run is counted as lost by the engine and created again only when
// an engine SIGKILL came after the key's first request was sent and
// before the item's creation; without such a kill it is a violation (a
// 201 read before its run existed, or a run created twice).

// recreatedVerdict is what a run created after its first 2xx was read
// is: the engine's loss, or a violation.
type recreatedVerdict struct {
	Recreated bool // createdAt is after the first 2xx naming it was read
	Lost      bool // and an engine SIGKILL came between the send and the creation
	Kill      time.Time
}

// classifyRecreated classifies r, present after recovery with its item's
// createdAt, against the times of the engine's SIGKILLs.
func classifyRecreated(r ackedRun, created time.Time, kills []time.Time) recreatedVerdict {
	v := recreatedVerdict{Recreated: created.After(r.Acked)}
	if !v.Recreated {
		return v
	}
	for _, k := range kills {
		if k.After(r.Sent) && k.Before(created) && (v.Kill.IsZero() || k.Before(v.Kill)) {
			v.Kill = k
		}
	}
	v.Lost = !v.Kill.IsZero()
	return v
}

// recreatedRuns classifies the acknowledged runs present after recovery
// (created: each run's createdAt, from the runs table): lost holds a line
// for each run the engine lost and a later request created again,
// lostKeys their keys, violations a line for each run created after its
// 201 was read with no engine SIGKILL to explain it.
func recreatedRuns(acked []ackedRun, created map[string]time.Time, kills []time.Time) (lost, violations, lostKeys []string) {
	slices.SortFunc(acked, func(a, b ackedRun) int { return a.Acked.Compare(b.Acked) })
	for _, r := range acked {
		c, ok := created[r.ID]
		if !ok {
			continue // missing: missingRuns judges it
		}
		v := classifyRecreated(r, c, kills)
		if !v.Recreated {
			continue
		}
		line := fmt.Sprintf("run %s (request sent %s, 201 read %s) created again at %s", r.ID, r.Sent.Format(time.StampMilli), r.Acked.Format(time.StampMilli), c.Format(time.StampMilli))
		if v.Lost {
			lost = append(lost, fmt.Sprintf("%s, after the engine SIGKILL of %s", line, v.Kill.Format(time.StampMilli)))
			lostKeys = append(lostKeys, r.Key)
		} else {
			violations = append(violations, line+", with no engine SIGKILL between its request and its creation")
		}
	}
	return lost, violations, lostKeys
}

// layer1Reader reads the Layer-1 records of createRun keys in an
// `idemkit dev` stack's idempotency table.
type layer1Reader struct {
	s      *idemdynamo.Store
	tenant string
}

func newLayer1Reader(t *testing.T, c *dynamodb.Client, table, tenant string) *layer1Reader {
	t.Helper()
	s, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: table})
	must(t, err)
	return &layer1Reader{s: s, tenant: tenant}
}

// get reads the record of key: a createRun record is scoped by the
// credential's tenant ("tenant:"+id, idem.Config's scope of an
// authenticated tenant) and createRun's operation (apifn.OpCreateRun).
func (l *layer1Reader) get(ctx context.Context, key string) (idem.Record, bool, error) {
	return l.s.Get(ctx, keyspace.ID("tenant:"+l.tenant, apifn.OpCreateRun, key), time.Now())
}

// checkLookup proves the reader on runs that exist: each one's record must
// be found completed naming it, or a wrong record ID would make every
// missing run look like a lost transaction.
func (l *layer1Reader) checkLookup(ctx context.Context, t *testing.T, present []ackedRun) {
	t.Helper()
	for _, r := range present {
		rec, found, err := l.get(ctx, r.Key)
		must(t, err)
		if v := classifyMissing(r, rec, found, nil); !v.Completed {
			t.Fatalf("the Layer-1 record of run %s, which exists: %s; want completed naming it (the record lookup is wrong)", r.ID, v.Record)
		}
	}
}

// missingRuns classifies the runs missing after recovery: lost holds the
// engine's losses, violations every other missing run (a line each), and
// maxGap is the largest gap among the losses.
func (l *layer1Reader) missingRuns(ctx context.Context, t *testing.T, missing []ackedRun, kills []time.Time) (lost, violations, lostKeys []string, maxGap time.Duration) {
	t.Helper()
	slices.SortFunc(missing, func(a, b ackedRun) int { return a.Acked.Compare(b.Acked) })
	for _, r := range missing {
		rec, found, err := l.get(ctx, r.Key)
		must(t, err)
		v := classifyMissing(r, rec, found, kills)
		line := fmt.Sprintf("run %s (request sent %s, 201 read %s): %s", r.ID, r.Sent.Format(time.StampMilli), r.Acked.Format(time.StampMilli), v)
		if v.Lost {
			if len(lost) == 0 || v.Gap > maxGap {
				maxGap = v.Gap
			}
			lost = append(lost, line)
			lostKeys = append(lostKeys, r.Key)
		} else {
			violations = append(violations, line)
		}
	}
	return lost, violations, lostKeys, maxGap
}

// TestClassifyMissingRun: a missing run is the engine's loss only when a
// kill came after its request was sent and its whole transaction is
// missing (Layer-1 record absent or pending), however long after the 201
// the kill came; the gap is reported from the 201 to the first kill after
// the request was sent.
func TestClassifyMissingRun(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	run := ackedRun{ID: "soak/run1", Key: "k1", Sent: at(0), Acked: at(100)}
	body := func(id string) *idem.Response {
		return &idem.Response{Status: 201, Body: []byte(`{"runId":"` + id + `","status":"queued"}`)}
	}
	completed := idem.Record{State: idem.StateCompleted, Response: body(run.ID)}
	for _, c := range []struct {
		name  string
		rec   idem.Record
		found bool
		kills []time.Time
		lost  bool
		gap   time.Duration
	}{
		{"absent, kill long after the 201", idem.Record{}, false, []time.Time{at(2400)}, true, 2300 * time.Millisecond},
		{"absent, kill just after", idem.Record{}, false, []time.Time{at(108)}, true, 8 * time.Millisecond},
		{"absent, kill between send and 201", idem.Record{}, false, []time.Time{at(50)}, true, -50 * time.Millisecond},
		{"absent, the first kill after the send counts", idem.Record{}, false, []time.Time{at(-500), at(9000), at(700)}, true, 600 * time.Millisecond},
		{"pending, kill after", idem.Record{State: idem.StatePending}, true, []time.Time{at(900)}, true, 800 * time.Millisecond},
		{"absent, kill only before the send", idem.Record{}, false, []time.Time{at(-1)}, false, 0},
		{"absent, kill at the send", idem.Record{}, false, []time.Time{at(0)}, false, 0},
		{"absent, no kill", idem.Record{}, false, nil, false, 0},
		{"pending, no kill after", idem.Record{State: idem.StatePending}, true, []time.Time{at(-10)}, false, 0},
		{"completed naming it, kill just after", completed, true, []time.Time{at(101)}, false, time.Millisecond},
		{"completed naming another run", idem.Record{State: idem.StateCompleted, Response: body("soak/run2")}, true, []time.Time{at(200)}, false, 100 * time.Millisecond},
		{"retryable failure", idem.Record{State: idem.StateRetryableFailure}, true, []time.Time{at(200)}, false, 100 * time.Millisecond},
		{"terminal failure", idem.Record{State: idem.StateTerminalFailure, Response: &idem.Response{Status: 422, Body: []byte(`{"error":"x"}`)}}, true, []time.Time{at(200)}, false, 100 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := classifyMissing(run, c.rec, c.found, c.kills)
			if v.Lost != c.lost || v.Gap != c.gap {
				t.Fatalf("lost %t gap %s (%s), want lost %t gap %s", v.Lost, v.Gap, v, c.lost, c.gap)
			}
			if v.Completed != (c.name == "completed naming it, kill just after") {
				t.Fatalf("completed %t: %s", v.Completed, v)
			}
		})
	}
}

// TestExcuseEngineLoss: only the illegal keys whose acknowledged run the
// engine lost are taken out; the verdict is Ok only when none is left.
func TestExcuseEngineLoss(t *testing.T) {
	quiet := func(string, ...any) {} // its verdict line is the soak's, not this test's
	rep := func() soak.Report {
		return soak.Report{Verdict: porcupine.Illegal, Keys: 3, Illegal: []string{"/runs k1", "/runs k2"}}
	}
	if got := excuseEngineLoss(quiet, rep(), []string{"k1"}); got.Verdict != porcupine.Illegal || !slices.Equal(got.Illegal, []string{"/runs k2"}) {
		t.Fatalf("one of two excused: %v %v", got.Verdict, got.Illegal)
	}
	if got := excuseEngineLoss(quiet, rep(), []string{"k1", "k2"}); got.Verdict != porcupine.Ok || len(got.Illegal) != 0 {
		t.Fatalf("both excused: %v %v", got.Verdict, got.Illegal)
	}
	if got := excuseEngineLoss(quiet, rep(), []string{"k"}); got.Verdict != porcupine.Illegal || len(got.Illegal) != 2 {
		t.Fatalf("a key that is a suffix of another's name excused: %v %v", got.Verdict, got.Illegal)
	}
	if got := excuseEngineLoss(quiet, rep(), nil); got.Verdict != porcupine.Illegal || len(got.Illegal) != 2 {
		t.Fatalf("nothing lost: %v %v", got.Verdict, got.Illegal)
	}
}

// TestClassifyRecreatedRun: a present run whose item was created after its
// first 2xx was read is the engine's loss only with a SIGKILL after the
// key's first request was sent and before the creation; a run created
// before its 2xx was read is no case at all.
func TestClassifyRecreatedRun(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	run := ackedRun{ID: "soak/run1", Key: "k1", Sent: at(0), Acked: at(100)}
	for _, c := range []struct {
		name            string
		created         time.Time
		kills           []time.Time
		recreated, lost bool
	}{
		{"created before the 201, no kill", at(60), nil, false, false},
		{"created before the 201, kill after", at(60), []time.Time{at(500)}, false, false},
		{"created at the 201's read", at(100), []time.Time{at(50)}, false, false},
		{"created again after a kill after the 201", at(9000), []time.Time{at(4000)}, true, true},
		{"created again after a kill between send and 201", at(9000), []time.Time{at(50)}, true, true},
		{"created again, no kill", at(9000), nil, true, false},
		{"created again, kill only before the send", at(9000), []time.Time{at(-1)}, true, false},
		{"created again, kill only at the send", at(9000), []time.Time{at(0)}, true, false},
		{"created again, kill only after the creation", at(9000), []time.Time{at(9500)}, true, false},
		{"created again, one kill of three between", at(9000), []time.Time{at(-300), at(9001), at(3000)}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := classifyRecreated(run, c.created, c.kills)
			if v.Recreated != c.recreated || v.Lost != c.lost {
				t.Fatalf("recreated %t lost %t (kill %s), want %t %t", v.Recreated, v.Lost, v.Kill, c.recreated, c.lost)
			}
		})
	}
	lost, violations, keys := recreatedRuns([]ackedRun{
		{ID: "a", Key: "ka", Sent: at(0), Acked: at(100)},
		{ID: "b", Key: "kb", Sent: at(0), Acked: at(100)},
		{ID: "c", Key: "kc", Sent: at(0), Acked: at(100)},
		{ID: "d", Key: "kd", Sent: at(0), Acked: at(100)},
	}, map[string]time.Time{"a": at(50), "b": at(5000), "c": at(200)}, []time.Time{at(1000)})
	if len(lost) != 1 || !slices.Equal(keys, []string{"kb"}) || len(violations) != 1 || !strings.Contains(violations[0], "run c ") {
		t.Fatalf("lost %q keys %q violations %q", lost, keys, violations)
	}
}
