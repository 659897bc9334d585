package runstest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/runs/runstest"
)

// brokenClaim is the memory store with its Claim deliberately broken: it
// takes any live, unparked run, whatever progress the run made since the
// bound (the stale-run pass would overtake every live executor).
type brokenClaim struct{ *runs.MemRuns }

func (b brokenClaim) Claim(ctx context.Context, id string, _, now time.Time) (runs.Run, error) {
	r, err := b.Get(ctx, id)
	if err != nil {
		return r, err
	}
	if !r.Wake.IsZero() {
		return r, runs.ErrStatusConflict
	}
	return b.Adopt(ctx, id, now)
}

// brokenClaimEnv makes TestSuiteCatchesBrokenClaim the suite's run over
// brokenClaim, in the child process the test starts.
const brokenClaimEnv = "RUNSTEST_BROKEN_CLAIM"

// TestSuiteCatchesBrokenClaim: the suite bites. Run over the memory store
// with a broken Claim (in a child process of this test binary, so the
// expected failures stay there), it fails, and it is the Claim cases that
// fail.
func TestSuiteCatchesBrokenClaim(t *testing.T) {
	if os.Getenv(brokenClaimEnv) == "1" {
		runstest.Run(t, runstest.Harness{NewStore: func(*testing.T) runstest.Store { return brokenClaim{runs.NewMemRuns()} }})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteCatchesBrokenClaim$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), brokenClaimEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a store whose Claim ignores the run's progress:\n%s", out)
	}
	for _, c := range []string{"Claim/CompareAndSet", "Claim/Race", "Claim/LostAnswer", "Renew/CompareAndSet", "Renew/RaceWithClaim"} {
		if !strings.Contains(string(out), "--- FAIL: TestSuiteCatchesBrokenClaim/"+c+" ") {
			t.Errorf("case %s did not fail over the broken Claim", c)
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}
}

// statusOnlyFinish is the memory store whose Finish checks the run's
// status and not its claim epoch, as the executor's end of a run did
// before it was fenced: an execution taken over still ends the run.
type statusOnlyFinish struct{ *runs.MemRuns }

func (s statusOnlyFinish) Finish(ctx context.Context, id string, _ int64, to runs.Status, msg string, now time.Time) (runs.Run, error) {
	return s.Transition(ctx, id, []runs.Status{runs.StatusRunning}, to, msg, now)
}

const statusOnlyFinishEnv = "RUNSTEST_STATUS_ONLY_FINISH"

// TestSuiteCatchesUnfencedFinish: run over a store whose Finish ignores
// the claim epoch (a stale execution ends a run another holds), the suite
// fails, on the Finish cases that take the run before its end.
func TestSuiteCatchesUnfencedFinish(t *testing.T) {
	if os.Getenv(statusOnlyFinishEnv) == "1" {
		runstest.Run(t, runstest.Harness{NewStore: func(*testing.T) runstest.Store { return statusOnlyFinish{runs.NewMemRuns()} }})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteCatchesUnfencedFinish$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), statusOnlyFinishEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a store whose Finish ignores the claim epoch:\n%s", out)
	}
	if !strings.Contains(string(out), "--- FAIL: TestSuiteCatchesUnfencedFinish/Finish/Fenced ") {
		t.Errorf("case Finish/Fenced did not fail over the unfenced Finish:\n%s", out)
	}
}

// statusOnlyPark is the memory store whose Park checks the run's status
// and not its claim epoch, as the executor's park did before it was
// fenced: an execution taken over still parks the run.
type statusOnlyPark struct{ *runs.MemRuns }

func (s statusOnlyPark) Park(ctx context.Context, id string, _ int64, w runs.Wake, now time.Time) (runs.Run, error) {
	if err := s.Schedule(ctx, id, w, now); err != nil {
		r, _ := s.Get(ctx, id)
		return r, err
	}
	return s.Get(ctx, id)
}

const statusOnlyParkEnv = "RUNSTEST_STATUS_ONLY_PARK"

// TestSuiteCatchesUnfencedPark: run over a store whose Park ignores the
// claim epoch, the suite fails on Park/Fenced.
func TestSuiteCatchesUnfencedPark(t *testing.T) {
	if os.Getenv(statusOnlyParkEnv) == "1" {
		runstest.Run(t, runstest.Harness{NewStore: func(*testing.T) runstest.Store { return statusOnlyPark{runs.NewMemRuns()} }})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteCatchesUnfencedPark$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), statusOnlyParkEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a store whose Park ignores the claim epoch:\n%s", out)
	}
	if !strings.Contains(string(out), "--- FAIL: TestSuiteCatchesUnfencedPark/Park/Fenced ") {
		t.Errorf("case Park/Fenced did not fail over the unfenced Park:\n%s", out)
	}
}
