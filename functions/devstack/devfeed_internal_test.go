package devstack

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/stream"
)

// TestWriteFeedHandsOverInOrderPerKeyAndRetries: the feed that stands in
// for the runs stream hands every put its filter passes to the handler
// exactly once it succeeds, in the order of the puts per partition key
// while puts of several keys arrive at once; a failed record is retried
// and holds back only its own key; filtered items are never handed over;
// and the record keeps the item as it was put, whatever the writer does
// with its map afterwards.
func TestWriteFeedHandsOverInOrderPerKeyAndRetries(t *testing.T) {
	const keys, perKey = 6, 25
	var mu sync.Mutex
	got := map[string][]int{}
	failures := map[string]int{"run-2": 3} // run-2's first record fails three times
	p := &poller{name: "runs", keyAttr: "pk", parallel: 4, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		sleep: func(context.Context, time.Duration) {}, // retries without waiting
		filter: func(r stream.StreamRecord) bool {
			k, _ := r.NewImage["kind"].(*types.AttributeValueMemberS)
			return k != nil && k.Value == "run"
		},
		handle: func(_ context.Context, recs []stream.StreamRecord) []string {
			if len(recs) != 1 || recs[0].EventName != "INSERT" {
				t.Errorf("handed %d records (%+v), want one INSERT", len(recs), recs)
				return nil
			}
			r := recs[0]
			pk := r.Keys["pk"].(*types.AttributeValueMemberS).Value
			n, _ := strconv.Atoi(r.NewImage["n"].(*types.AttributeValueMemberN).Value)
			mu.Lock()
			defer mu.Unlock()
			if failures[pk] > 0 {
				failures[pk]--
				return []string{r.EventID}
			}
			got[pk] = append(got[pk], n)
			return nil
		}}
	f := newWriteFeed(p, []string{"pk"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { f.run(ctx); close(done) }()

	var wg sync.WaitGroup
	for k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk := "run-" + strconv.Itoa(k)
			for n := range perKey {
				item := map[string]types.AttributeValue{
					"pk":   &types.AttributeValueMemberS{Value: pk},
					"n":    &types.AttributeValueMemberN{Value: strconv.Itoa(n)},
					"kind": &types.AttributeValueMemberS{Value: "run"},
				}
				f.put(item)
				item["n"] = &types.AttributeValueMemberN{Value: "-1"} // the writer reuses its map
				f.put(map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "n": &types.AttributeValueMemberN{Value: "-2"},
					"kind": &types.AttributeValueMemberS{Value: "event"}})
			}
		}()
	}
	wg.Wait()
	for {
		mu.Lock()
		total := 0
		for _, ns := range got {
			total += len(ns)
		}
		mu.Unlock()
		if total == keys*perKey {
			break
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatalf("handed over %d of %d records", total, keys*perKey)
		}
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for k := range keys {
		pk := "run-" + strconv.Itoa(k)
		ns := got[pk]
		if len(ns) != perKey {
			t.Fatalf("%s: %d records handed over, want %d: %v", pk, len(ns), perKey, ns)
		}
		for i, n := range ns {
			if n != i {
				t.Fatalf("%s: handed over %v, want 0..%d in the order of the puts", pk, ns, perKey-1)
			}
		}
	}
	if failures["run-2"] != 0 {
		t.Fatalf("run-2's failing record was tried %d times too few", failures["run-2"])
	}
}

// TestWriteFeedHandsOverWhatTheRunsMappingPasses: through the runs
// stream's filter from template.yaml (newRunsPoller), the feed hands the
// executor a new run's put as an INSERT and a run's update from paused to
// running (a resume) as a MODIFY with both images, and nothing for the
// run's other updates (RED_TEAM 591).
func TestWriteFeedHandsOverWhatTheRunsMappingPasses(t *testing.T) {
	var mu sync.Mutex
	var got []stream.StreamRecord
	p, err := newRunsPoller("runs", func(_ context.Context, recs []stream.StreamRecord) []string {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, recs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	keys, err := templateKeyAttrs("RunsTable")
	if err != nil {
		t.Fatal(err)
	}
	f := newWriteFeed(p, keys)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { f.run(ctx); close(done) }()
	run := func(id, status string) map[string]types.AttributeValue {
		item := map[string]types.AttributeValue{"status": &types.AttributeValueMemberS{Value: status}}
		for _, k := range keys {
			item[k] = &types.AttributeValueMemberS{Value: id}
		}
		return item
	}
	f.put(run("a", "pending"))
	f.modify(run("a", "pending"), run("a", "running"))  // the executor's start
	f.modify(run("a", "running"), run("a", "running"))  // a node's append
	f.modify(run("a", "running"), run("a", "paused"))   // a pause
	f.modify(run("a", "paused"), run("a", "paused"))    // a held run.paused recorded
	f.modify(run("a", "paused"), run("a", "running"))   // the resume
	f.modify(run("a", "paused"), run("a", "cancelled")) // a cancel
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= 2 {
			break
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatalf("handed over %d records, want 2", n)
		}
	}
	time.Sleep(100 * time.Millisecond) // any record more has had its time
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	status := func(img map[string]types.AttributeValue) string {
		s, _ := img["status"].(*types.AttributeValueMemberS)
		if s == nil {
			return ""
		}
		return s.Value
	}
	if len(got) != 2 || got[0].EventName != "INSERT" || status(got[0].NewImage) != "pending" ||
		got[1].EventName != "MODIFY" || status(got[1].OldImage) != "paused" || status(got[1].NewImage) != "running" || len(got[1].Keys) != len(keys) {
		t.Fatalf("handed over %+v, want the put's INSERT and the resume's MODIFY", got)
	}
}
