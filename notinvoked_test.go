package idemkit_test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/functions/executor/execfn"
)

// notInvokedExpr is the expression of a scheduled function's not-invoked
// alarm: its invocations per period, 0 in a period without one, but only
// from its first invocation in the range CloudWatch reads on: before it,
// and in a range with none at all, no data.
var notInvokedExpr = regexp.MustCompile(`^IF\(RUNNING_SUM\(FILL\(([a-z][A-Za-z0-9_]*), 0\)\) > 0, FILL\(([a-z][A-Za-z0-9_]*), 0\)\)$`)

// scheduleEvery returns the interval in seconds of a function's one rate
// schedule (0 for a function without one), and whether the schedule
// alone invokes it.
func scheduleEvery(t *testing.T, tp tmpl, fn string) (every int, alone bool) {
	t.Helper()
	rateRe := regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$`)
	unit := map[string]int{"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}
	events := mapping(get(get(tp.resources[fn], "Properties"), "Events"))
	for name, ev := range events {
		if get(ev, "Type").Value != "Schedule" {
			continue
		}
		if every != 0 {
			t.Fatalf("%s: two schedules (teach scheduleEvery)", fn)
		}
		sched := get(get(ev, "Properties"), "Schedule").Value
		if hourlyCronRe.MatchString(sched) {
			every = 3600 // once an hour, on a fixed minute (RED_TEAM 440)
			continue
		}
		m := rateRe.FindStringSubmatch(sched)
		if m == nil {
			t.Fatalf("%s: schedule %s %q is neither a rate nor an hourly cron", fn, name, sched)
		}
		n, _ := strconv.Atoi(m[1])
		every = n * unit[m[2]]
	}
	return every, len(events) == 1
}

// heartbeats are the metrics a function invoked by other triggers besides
// its schedule writes once per scheduled invocation: the schedule's
// invocations, which its Lambda Invocations mix with the others'.
var heartbeats = map[string]string{"ExecutorFunction": execfn.MetricResumePasses}

// alarmSim is the state CloudWatch gives an alarm on notInvokedExpr with
// TreatMissingData ignore, evaluated over periods whose invocation counts
// are known, as its documentation states the evaluation: it reads a range
// of more periods than EvaluationPeriods (rangeLen) ending with the
// latest; RUNNING_SUM and FILL run over that range; a range without any
// data point keeps the state (ignore); otherwise the most recent
// EvaluationPeriods data points are evaluated, ALARM when DatapointsToAlarm
// of them breach, OK when one does not (or there are EvaluationPeriods
// of them), the state kept otherwise.
type alarmSim struct {
	evalPeriods, toAlarm, rangeLen int
	threshold                      float64
	state                          string
	paged                          int // transitions to ALARM
}

// eval evaluates at period now; counts[i] is the invocations of period i
// seen so far (the current one may not have had its run yet).
func (a *alarmSim) eval(counts map[int]int, now int) {
	var points []float64 // most recent last
	sum := 0
	for i := now - a.rangeLen + 1; i <= now; i++ {
		sum += counts[i]
		if sum > 0 {
			points = append(points, float64(counts[i]))
		}
	}
	if len(points) == 0 {
		return
	}
	ev := points[max(0, len(points)-a.evalPeriods):]
	breaching, notBreaching := 0, 0
	for _, v := range ev {
		if v < a.threshold {
			breaching++
		} else {
			notBreaching++
		}
	}
	next := a.state
	switch {
	case breaching >= a.toAlarm:
		next = "ALARM"
	case notBreaching > 0 || len(points) >= a.evalPeriods:
		next = "OK"
	}
	if next == "ALARM" && a.state != "ALARM" {
		a.paged++
	}
	a.state = next
}

// run evaluates periods 0..last, twice each: before the period's run (its
// count not yet seen) and after; runs says which periods have a run. It
// returns the state after each evaluation, by period and phase.
func (a alarmSim) run(runs func(int) bool, last int) (states map[[2]int]string, paged int) {
	states = map[[2]int]string{}
	a.state = "INSUFFICIENT_DATA"
	counts := map[int]int{}
	for p := 0; p <= last; p++ {
		a.eval(counts, p)
		states[[2]int{p, 0}] = a.state
		if runs(p) {
			counts[p] = 1
		}
		a.eval(counts, p)
		states[[2]int{p, 1}] = a.state
	}
	return states, a.paged
}

// TestScheduledFunctionsPageWhenNotInvoked (RED_TEAM 421, 423): a
// function a schedule invokes has an alarm that fires when the schedule
// stops invoking it (its rule disabled, its invoke permission removed, its
// invocations throttled until dropped), which writes nothing its errors
// alarms see: the retention sweeper, the only thing that deletes expired
// records where it is deployed, and the executor, whose minute schedule
// alone resumes parked runs and runs whose executor died. The alarm reads
// the scheduled invocations per period (the function's Lambda Invocations
// where the schedule alone invokes it, else the heartbeat its scheduled
// pass writes) as notInvokedExpr: no data until the first in the range
// CloudWatch reads, so a new stack (or one just switched to a posture that
// runs the sweeper) is not paged before its first run, and missing data
// ignored, so the alarm stays in ALARM while the schedule stays silent
// past that range. Simulated as CloudWatch documents the evaluation, for
// range lengths from EvaluationPeriods + 1 periods to a day (24 more at
// most), each period evaluated before and after its run: a new stack is
// never paged; a function that stops is paged once, EvaluationPeriods
// periods after its last run at the latest and not before EvaluationPeriods
// - 1 periods without one, stays in ALARM for two days of silence, and
// clears on its next run; a run missed now and then pages nobody. Before,
// no alarm read the sweeper's invocations, and nothing counted the
// executor's scheduled passes.
func TestScheduledFunctionsPageWhenNotInvoked(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	checked := 0
	for _, fn := range slices.Sorted(slices.Values(tp.typesOf("AWS::Serverless::Function"))) {
		every, alone := scheduleEvery(t, tp, fn)
		if every == 0 {
			continue
		}
		checked++
		beat := heartbeats[fn]
		if !alone && beat == "" {
			t.Errorf("%s is invoked by a schedule and by other triggers, but heartbeats names no metric its scheduled invocations write", fn)
			continue
		}
		var alarm string
		var props *yaml.Node
		period := 0
		for _, id := range slices.Sorted(slices.Values(tp.typesOf("AWS::CloudWatch::Alarm"))) {
			p := get(tp.resources[id], "Properties")
			for _, m := range sequence(get(p, "Metrics")) {
				st := get(get(m, "MetricStat"), "Metric")
				if st == nil {
					continue
				}
				ns, name := get(st, "Namespace"), get(st, "MetricName").Value
				switch {
				case alone && ns.Value == "AWS/Lambda" && name == "Invocations":
					for _, d := range sequence(get(st, "Dimensions")) {
						if get(d, "Name").Value == "FunctionName" && slices.Contains(refs(get(d, "Value")), fn) {
							alarm, props = id, p
						}
					}
				case !alone && ns.Tag == "!Sub" && ns.Value == stackNamespace && name == beat:
					alarm, props = id, p
				}
			}
		}
		if alarm == "" {
			what := "its Invocations"
			if !alone {
				what = beat
			}
			t.Errorf("%s is invoked by a schedule, but no alarm reads %s: a %s whose schedule stops invoking it pages nobody", fn, what, fn)
			continue
		}
		if fc, ac := get(tp.resources[fn], "Condition"), get(tp.resources[alarm], "Condition"); (fc == nil) != (ac == nil) || (fc != nil && fc.Value != ac.Value) {
			t.Errorf("%s: its condition is not %s's", alarm, fn)
		}
		// One data point a schedule interval: the invocations of the
		// function, from its first in range on.
		var inv, expr string
		for _, m := range sequence(get(props, "Metrics")) {
			if st := get(m, "MetricStat"); st != nil {
				inv = get(m, "Id").Value
				period, _ = strconv.Atoi(get(st, "Period").Value)
				if get(st, "Stat").Value != "Sum" || period < every || period%every != 0 {
					t.Errorf("%s: %s is not the Sum of the scheduled invocations per whole number of its schedule's intervals (%d s)", alarm, inv, every)
					period = every
				}
			} else if r := get(m, "ReturnData"); r == nil || r.Value != "false" {
				expr = get(m, "Expression").Value
			}
		}
		if m := notInvokedExpr.FindStringSubmatch(expr); m == nil || m[1] != inv || m[2] != inv {
			t.Errorf("%s returns %q; want IF(RUNNING_SUM(FILL(%s, 0)) > 0, FILL(%s, 0)): no data before the first invocation in range", alarm, expr, inv, inv)
			continue
		}
		for key, want := range map[string]string{"TreatMissingData": "ignore", "ComparisonOperator": "LessThanThreshold"} {
			if v := get(props, key); v == nil || v.Value != want {
				t.Errorf("%s: %s is not %s", alarm, key, want)
			}
		}
		th := tp.params[get(props, "Threshold").Value]
		if get(th, "Default") == nil || get(th, "Default").Value != "1" || get(th, "MaxValue") == nil || get(th, "MaxValue").Value != "1" {
			t.Errorf("%s: its threshold parameter is not 1 at most: a period may hold a single run (a new stack's first)", alarm)
			continue
		}
		evalPeriods, err := strconv.Atoi(get(props, "EvaluationPeriods").Value)
		if err != nil || evalPeriods < 2 {
			t.Errorf("%s: EvaluationPeriods %v: one late run would page", alarm, get(props, "EvaluationPeriods").Value)
			continue
		}
		toAlarm := evalPeriods
		if d := get(props, "DatapointsToAlarm"); d != nil {
			toAlarm, _ = strconv.Atoi(d.Value)
		}
		if toAlarm != evalPeriods {
			t.Errorf("%s: DatapointsToAlarm %d of %d: a function missing some of its runs is paged as stopped", alarm, toAlarm, evalPeriods)
			continue
		}
		perDay := 86400 / period
		for rangeLen := evalPeriods + 1; rangeLen <= min(perDay, evalPeriods+24); rangeLen++ {
			sim := alarmSim{evalPeriods: evalPeriods, toAlarm: toAlarm, rangeLen: rangeLen, threshold: 1}
			where := fmt.Sprintf("%s, a range of %d periods", alarm, rangeLen)
			// A new stack: the first run in its first interval, or its second.
			for first := 0; first <= 1; first++ {
				if _, paged := sim.run(func(p int) bool { return p >= first }, 2*perDay); paged != 0 {
					t.Errorf("%s: a new stack whose first run comes in interval %d is paged", where, first)
				}
			}
			// Not invoked at all since the alarm was created: no data.
			if states, paged := sim.run(func(int) bool { return false }, 2*perDay); paged != 0 || states[[2]int{2 * perDay, 1}] != "INSUFFICIENT_DATA" {
				t.Errorf("%s: a stack whose function has not run yet is paged", where)
			}
			// One run missed, now and then.
			if _, paged := sim.run(func(p int) bool { return p%5 != 3 }, 2*perDay); paged != 0 {
				t.Errorf("%s: one run missed pages", where)
			}
			// Runs in intervals 0..9, none for two days, then again.
			last, resume := 9, 9+2*perDay
			states, paged := sim.run(func(p int) bool { return p <= last || p >= resume }, resume)
			if paged != 1 {
				t.Errorf("%s: a function that stopped for two days paged %d times, want once", where, paged)
			}
			for p := last + 1; p < resume; p++ {
				for phase := 0; phase <= 1; phase++ {
					s := states[[2]int{p, phase}]
					switch {
					case p < last+evalPeriods && s == "ALARM":
						t.Errorf("%s: ALARM in interval %d, %d intervals after the last run", where, p, p-last)
					case p >= last+evalPeriods && phase == 1 && s != "ALARM":
						t.Errorf("%s: %s in interval %d, %d intervals without a run", where, s, p, p-last)
					}
				}
			}
			if s := states[[2]int{resume, 1}]; s != "OK" {
				t.Errorf("%s: %s after the function runs again", where, s)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no function invoked by its schedule alone")
	}
}
