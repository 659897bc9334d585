package sweepfn_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/sweeper/sweepfn"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/sweeper"
)

// segmentedTable is a table of sweepfn.Segments segments, none holding an
// expired item, whose Scan pages move the run's clock: a page of a
// segment in short ends it, any other page costs `step` of the run's time
// and leads to another (the segment outlasts any run). An error, when
// set, answers the first page.
type segmentedTable struct {
	short map[int32]bool
	step  time.Duration
	fail  error

	mu  sync.Mutex
	now time.Time
}

func (s *segmentedTable) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *segmentedTable) Scan(_ context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	s.now = s.now.Add(s.step)
	out := &dynamodb.ScanOutput{ScannedCount: 1}
	if !s.short[aws.ToInt32(in.Segment)] {
		out.LastEvaluatedKey = map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "next"}}
	}
	return out, nil
}

func (s *segmentedTable) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return nil, errors.New("nothing is expired")
}

// idemkit.sweeper.incomplete_total, which STACK-sweeper-incomplete pages
// on, is 1 only when a run's time ran out before the end of the segment
// it started with: that segment's tail is then swept by no run, since the
// runs that reach it later begin it from its start. A run that finished
// its first segment and ran out in a later one reports 0 (the hourly
// rotation begins the next run there, so the table is swept to its end
// within 16 runs), and so does a failed run (STACK-sweeper-errors pages
// those). It was 1 for every run that stopped before the end of the whole
// table, so a table merely larger than one run kept the alarm firing
// (RED_TEAM 545).
func TestIncompleteMeansTheFirstSegmentWasNotFinished(t *testing.T) {
	const margin = 10 * time.Second
	for _, tc := range []struct {
		name  string
		first bool // the segment the run starts with ends within its time
		fail  error
		want  float64
	}{
		{name: "ran out in a later segment", first: true, want: 0},
		{name: "ran out in the first segment", first: false, want: 1},
		{name: "failed in the first segment", first: false, fail: errors.New("injected"), want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			dl, _ := ctx.Deadline()
			// The run's clock starts at a whole hour, 10 to 70 minutes
			// before its stop point, and its third page passes that point.
			start := dl.Add(-margin - 10*time.Minute).Truncate(time.Hour)
			step := dl.Add(-margin).Sub(start)/3 + time.Second
			tbl := &segmentedTable{short: map[int32]bool{}, step: step, fail: tc.fail, now: start}
			firstSeg := int32(start.Unix() / 3600 % sweepfn.Segments)
			if tc.first {
				tbl.short[firstSeg] = true
			}
			var out syncBuf
			h := &sweepfn.Handler{Margin: margin, Now: tbl.clock, Metrics: emf.New(&out, ""),
				Targets: []sweepfn.Target{{Label: sweepfn.TableEffects,
					Sweeper: &sweeper.Sweeper{API: tbl, Table: "effects", KeyAttrs: []string{"pk", "sk"}, Segments: sweepfn.Segments}}}}
			rep, err := h.Sweep(ctx)
			if (err != nil) != (tc.fail != nil) || rep.Tables[0].Complete {
				t.Fatalf("report %+v, %v", rep, err)
			}
			m := metrics(t, out.String())
			got, ok := m[sweepfn.MetricIncomplete+" effects"]
			if !ok || got != tc.want {
				t.Fatalf("incomplete_total %v (emitted %v), want %v; metrics %v", got, ok, tc.want, m)
			}
		})
	}
}
