package idemkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/functions/sweeper/sweepfn"
	"github.com/idemkit/idemkit/internal/sweeper"
)

// firstSegment records the segment of a sweep's first Scan and stops it.
type firstSegment struct{ seg int32 }

func (f *firstSegment) Scan(_ context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	f.seg = aws.ToInt32(in.Segment)
	return nil, errors.New("stop here")
}

func (f *firstSegment) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, errors.New("no delete expected")
}

// The sweeper starts each run at the parallel-scan segment its clock hour
// selects, so that sweepfn.Segments hourly runs start at as many different
// segments and a table too large for one run is still swept to its end.
// That holds only if consecutive runs fall in consecutive clock hours. A
// rate(1 hour) schedule fires about an hour apart, on no fixed minute: one
// firing around the turn of an hour put two runs in one clock hour (one
// segment started twice in a cycle, the next never). The function is
// scheduled on a fixed minute well inside the hour (an EventBridge cron
// fires within its minute), and runs fired at any second of that minute in
// consecutive hours start at every segment in turn (RED_TEAM 440).
func TestSweeperScheduleStartsEverySegmentInTurn(t *testing.T) {
	var doc struct {
		Resources map[string]struct {
			Properties struct {
				Events map[string]struct {
					Type       string `yaml:"Type"`
					Properties struct {
						Schedule string `yaml:"Schedule"`
					} `yaml:"Properties"`
				} `yaml:"Events"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(idemkit.Template, &doc); err != nil {
		t.Fatal(err)
	}
	events := doc.Resources["SweeperFunction"].Properties.Events
	if len(events) != 1 {
		t.Fatalf("SweeperFunction events %v, want one schedule", events)
	}
	var schedule string
	for _, ev := range events {
		if ev.Type != "Schedule" {
			t.Fatalf("SweeperFunction event of type %q, want Schedule", ev.Type)
		}
		schedule = ev.Properties.Schedule
	}
	m := regexp.MustCompile(`^cron\(([0-9]{1,2}) \* \* \* \? \*\)$`).FindStringSubmatch(schedule)
	if m == nil {
		t.Fatalf("SweeperFunction schedule %q: want an hourly cron on a fixed minute, cron(M * * * ? *)", schedule)
	}
	minute, _ := strconv.Atoi(m[1])
	// A run fires within its minute, and Lambda starts it a little later;
	// a minute near either end of the hour could still cross it.
	if minute < 2 || minute > 57 {
		t.Fatalf("schedule %q fires at minute %d, too near the turn of an hour", schedule, minute)
	}
	start := time.Date(2026, 12, 7, 0, minute, 0, 0, time.UTC)
	for _, jitter := range []time.Duration{0, 59*time.Second + 999*time.Millisecond} {
		seen := map[int32]bool{}
		for h := range sweepfn.Segments {
			api := &firstSegment{seg: -1}
			w := &sweeper.Sweeper{API: api, Table: "t", Segments: sweepfn.Segments}
			at := start.Add(time.Duration(h)*time.Hour + jitter)
			if _, err := w.SweepUntil(context.Background(), at, nil); err == nil {
				t.Fatal("the sweep did not stop at its first Scan")
			}
			if seen[api.seg] {
				t.Fatalf("runs fired %v into the minute: the run at %s starts at segment %d again", jitter, at.Format(time.TimeOnly), api.seg)
			}
			seen[api.seg] = true
		}
	}
}

// The sweeper-incomplete alarms page on idemkit.sweeper.incomplete_total,
// which a run sets to 1 only when its time ran out inside the segment it
// started with: that segment's tail is swept by no run while it holds.
// Such a segment is a run's first once in sweepfn.Segments runs (every run
// only when every segment is that large), so one such run must page:
// the threshold's default is 1. Before, the metric was 1 for every run
// that stopped before the end of the table and the alarm needed 3 runs in
// 3 hours, so a table the rotation swept to its end kept it in alarm and
// the descriptions said its tail was never swept (RED_TEAM 545). The
// alarms, the threshold, the dashboard and the runbook rows say what the
// metric now counts.
func TestSweeperIncompleteAlarmsPageAnUnsweptSegment(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	const says = "segment it started with"
	alarms := 0
	for _, id := range tp.typesOf("AWS::CloudWatch::Alarm") {
		p := get(tp.resources[id], "Properties")
		if n := get(p, "MetricName"); n == nil || n.Value != sweepfn.MetricIncomplete {
			continue
		}
		alarms++
		if d := get(p, "AlarmDescription").Value; !strings.Contains(d, says) || strings.Contains(d, "runs stop before the end") {
			t.Errorf("%s: description %q does not say the alarm means a run's first segment unswept", id, d)
		}
		if s := get(p, "Statistic"); s == nil || s.Value != "Sum" {
			t.Errorf("%s: statistic %v, want Sum", id, s)
		}
		th := tp.params[get(p, "Threshold").Value]
		if def := get(th, "Default"); def == nil || def.Value != "1" {
			t.Errorf("%s: threshold default %v: one run whose first segment outlasted it must page (that segment is a run's first once in %d runs)", id, def, sweepfn.Segments)
		}
		if d := get(th, "Description").Value; !strings.Contains(d, says) {
			t.Errorf("%s: threshold description %q does not say what a counted run is", id, d)
		}
	}
	if alarms != 2 {
		t.Fatalf("%d alarms on %s, want the effects and idempotency tables'", alarms, sweepfn.MetricIncomplete)
	}
	dash, _ := json.Marshal(get(get(tp.resources["Dashboard"], "Properties"), "DashboardBody"))
	if !strings.Contains(string(dash), "runs whose first segment outlasted them") {
		t.Error("the dashboard does not say what its incomplete series counts")
	}
	b, err := os.ReadFile("docs/DEPLOYING.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(row, "| `STACK-sweeper-incomplete`") || strings.HasPrefix(row, "| `STACK-sweeper-idempotency-incomplete`") {
			alarms--
			if !strings.Contains(row, says) || strings.Contains(row, "Every hourly run") {
				t.Errorf("runbook row does not say what pages: %.80s", row)
			}
		}
	}
	if alarms != 0 {
		t.Error("runbook rows of the two alarms not found")
	}
}
