package idemkit_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
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
