package idemkit_test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
)

// notInvokedExpr is the expression of a scheduled function's not-invoked
// alarm: its invocations per period, 0 in a period without one, but only
// from its first invocation in the range CloudWatch reads on: before it,
// and in a range with none at all, no data.
var notInvokedExpr = regexp.MustCompile(`^IF\(RUNNING_SUM\(FILL\(([a-z][A-Za-z0-9_]*), 0\)\) > 0, FILL\(([a-z][A-Za-z0-9_]*), 0\)\)$`)

// scheduleEvery returns the interval in seconds of a function invoked by
// one rate schedule alone, or 0.
func scheduleEvery(t *testing.T, tp tmpl, fn string) int {
	t.Helper()
	rateRe := regexp.MustCompile(`^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$`)
	unit := map[string]int{"minute": 60, "minutes": 60, "hour": 3600, "hours": 3600, "day": 86400, "days": 86400}
	events := mapping(get(get(tp.resources[fn], "Properties"), "Events"))
	if len(events) != 1 {
		return 0
	}
	for _, ev := range events {
		if get(ev, "Type").Value != "Schedule" {
			return 0
		}
		m := rateRe.FindStringSubmatch(get(get(ev, "Properties"), "Schedule").Value)
		if m == nil {
			t.Fatalf("%s: schedule %q is not a rate", fn, get(get(ev, "Properties"), "Schedule").Value)
		}
		n, _ := strconv.Atoi(m[1])
		return n * unit[m[2]]
	}
	return 0
}

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

// TestScheduledFunctionsPageWhenNotInvoked (RED_TEAM 440): a function
// invoked by its schedule alone (the retention sweeper, the only thing
// that deletes expired records where it is deployed) has an alarm that
// fires when it stops being invoked (its schedule rule disabled, its
// invoke permission removed, its invocations throttled until dropped),
// which writes nothing its errors and incomplete-runs alarms see. The
// alarm reads the function's Lambda Invocations per schedule interval as
// notInvokedExpr: no data until the function's first invocation in the
// range CloudWatch reads, so a new stack (or one just switched to a
// posture that runs the sweeper) is not paged before its first run, and
// missing data ignored, so the alarm stays in ALARM while the function
// stays silent past that range. Simulated as CloudWatch documents the
// evaluation, for every range length from EvaluationPeriods + 1 periods
// to a day: a new stack is never paged; a function that stops is paged
// once, EvaluationPeriods intervals after its last run at the latest and
// not before EvaluationPeriods - 1 intervals without one, stays in ALARM
// for two days of silence, and clears on its next run; one missed run
// pages nobody. Before, no alarm read the sweeper's invocations.
func TestScheduledFunctionsPageWhenNotInvoked(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	checked := 0
	for _, fn := range slices.Sorted(slices.Values(tp.typesOf("AWS::Serverless::Function"))) {
		every := scheduleEvery(t, tp, fn)
		if every == 0 {
			continue
		}
		checked++
		var alarm string
		var props *yaml.Node
		for _, id := range slices.Sorted(slices.Values(tp.typesOf("AWS::CloudWatch::Alarm"))) {
			p := get(tp.resources[id], "Properties")
			for _, m := range sequence(get(p, "Metrics")) {
				st := get(get(m, "MetricStat"), "Metric")
				if st == nil || get(st, "Namespace").Value != "AWS/Lambda" || get(st, "MetricName").Value != "Invocations" {
					continue
				}
				for _, d := range sequence(get(st, "Dimensions")) {
					if get(d, "Name").Value == "FunctionName" && slices.Contains(refs(get(d, "Value")), fn) {
						alarm, props = id, p
					}
				}
			}
		}
		if alarm == "" {
			t.Errorf("%s is invoked by its schedule alone, but no alarm reads its Invocations: a %s that stops being invoked pages nobody", fn, fn)
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
				if get(st, "Stat").Value != "Sum" || get(st, "Period").Value != strconv.Itoa(every) {
					t.Errorf("%s: %s is not the Sum of its invocations per %d s, its schedule's interval", alarm, inv, every)
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
			t.Errorf("%s: its threshold parameter is not 1 at most: a period holds one run", alarm)
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
		perDay := 86400 / every
		for rangeLen := evalPeriods + 1; rangeLen <= max(perDay, evalPeriods+1); rangeLen++ {
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
