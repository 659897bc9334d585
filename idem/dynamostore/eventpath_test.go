package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/event"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// replayedValue is a Func value of kinds a JSON round trip must keep.
type replayedValue struct {
	Raw   []byte
	Text  string
	Big   string
	N     int64
	F     float64
	Slice []int
	Nil   []int
	M     map[string]int
}

// The event path on DynamoDB (the three emulators), attacked and held: a
// Func value of many kinds (every byte value, a 900 KB string kept in
// chunks, an int64 past 2^53, an empty and a nil slice, a valid U+FFFD)
// is replayed equal, fn run once; a Once whose Run fails is not recorded
// and runs again, then replays; a Once whose context is already
// cancelled is context.Canceled and does not run, one whose context is
// cancelled while Run runs records Run's value; in a FIFO batch a
// record whose key is in flight elsewhere is reported with every record
// after it, which do not run.
func TestEventPathOnDynamoDB(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(time.Now())
		g := sqsGuard(t, v.s, clk, 2*time.Second)
		raw := make([]byte, 256)
		for i := range raw {
			raw[i] = byte(i)
		}
		want := replayedValue{Raw: raw, Text: "é \u2028 <&> \uFFFD \\ufffd 😀", Big: strings.Repeat("x", 900<<10), N: 1<<62 + 1, F: 0.1, Slice: []int{}, M: map[string]int{"a": 1}}
		runs := 0
		f, _ := event.Func(g, event.Config[string]{Operation: "p-" + rnd(4), Key: func(s string) (string, error) { return s, nil }}, func(ctx context.Context, s string) (replayedValue, error) {
			runs++
			return want, nil
		})
		a, err := f(ctxT(t), "k1")
		b, err2 := f(ctxT(t), "k1")
		if err != nil || err2 != nil || runs != 1 || !bytes.Equal(b.Raw, raw) || b.Text != want.Text || b.Big != want.Big || b.N != want.N || b.F != want.F || b.Slice == nil || len(b.Slice) != 0 || b.Nil != nil || b.M["a"] != 1 {
			t.Errorf("replay differs: %v %v runs %d a.N %d b.N %d slice %#v nil %#v text %q", err, err2, runs, a.N, b.N, b.Slice, b.Nil, b.Text)
		}
		// Once: error not recorded, retried; cancelled ctx.
		op := "o-" + rnd(4)
		n := 0
		w := idem.Work{Operation: op, Key: "k", Payload: []byte("p"), Run: func(ctx context.Context) ([]byte, error) {
			n++
			if n == 1 {
				return nil, errors.New("flaky")
			}
			return []byte(`"done"`), nil
		}}
		if _, ran, err := g.Once(ctxT(t), w); err == nil || !ran {
			t.Errorf("first: %v %v", ran, err)
		}
		if val, ran, err := g.Once(ctxT(t), w); err != nil || !ran || string(val) != `"done"` {
			t.Errorf("retry: %s %v %v", val, ran, err)
		}
		if val, ran, err := g.Once(ctxT(t), w); err != nil || ran || string(val) != `"done"` || n != 2 {
			t.Errorf("replay: %s %v %v n=%d", val, ran, err, n)
		}
		cctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, ran, err := g.Once(cctx, idem.Work{Operation: op, Key: "k2", Payload: []byte("p"), Run: func(ctx context.Context) ([]byte, error) { t.Error("ran"); return nil, nil }}); !errors.Is(err, context.Canceled) || ran {
			t.Errorf("cancelled: %v %v", ran, err)
		}
		// Once whose context is cancelled while Run runs: Run's value
		// is recorded all the same, and replayed.
		rctx, rcancel := context.WithCancel(context.Background())
		m := 0
		cw := idem.Work{Operation: op, Key: "k3", Payload: []byte("p"), Run: func(context.Context) ([]byte, error) {
			m++
			rcancel()
			return []byte(`"kept"`), nil
		}}
		if val, ran, err := g.Once(rctx, cw); err != nil || !ran || string(val) != `"kept"` {
			t.Errorf("cancelled while running: %s %v %v", val, ran, err)
		}
		if val, ran, err := g.Once(ctxT(t), cw); err != nil || ran || string(val) != `"kept"` || m != 1 {
			t.Errorf("after a cancel while running: %s %v %v, runs %d", val, ran, err, m)
		}
		// FIFO: in-flight key in group A blocks the rest.
		fop := "f-" + rnd(4)
		ran := map[string]bool{}
		hold := make(chan struct{})
		started := make(chan struct{})
		h, _ := event.SQS(sqsGuard(t, v.s, clk, -1), event.SQSConfig{Operation: fop}, func(ctx context.Context, m events.SQSMessage) error {
			if m.MessageId == "m-2" && m.Attributes["x"] == "first" {
				close(started)
				<-hold
				return nil
			}
			ran[m.MessageId] = true
			return nil
		})
		first := batchOf("2")
		first.Records[0].EventSourceARN += ".fifo"
		first.Records[0].Attributes["x"] = "first"
		done := make(chan struct{})
		go func() { defer close(done); h(ctxT(t), first) }()
		<-started
		ev := batchOf("1", "2", "3")
		for i := range ev.Records {
			ev.Records[i].EventSourceARN += ".fifo"
			ev.Records[i].Attributes["MessageGroupId"] = "A"
		}
		r, _ := h(ctxT(t), ev)
		close(hold)
		<-done
		if failures(r) != "m-2,m-3" || ran["m-3"] {
			t.Errorf("fifo: %q ran %v", failures(r), ran)
		}
	})
}
