package regionsim_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/internal/regionsim"
	"github.com/idemkit/idemkit/internal/sweeper"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestLayer1HomePinnedTTLDeleteFromAReplica: under fenced-effects Layer 1
// is decided in the home region's replica of IdempotencyTable, and every
// deletion of a Layer-1 record must be decided there too. DynamoDB's TTL
// runs in every replica of a global table and its deletes replicate like
// any other write, last writer wins, so the template gives IdempotencyTable
// no TTL under fenced-effects (TestTemplateSweeperPerPosture) and deploys
// the sweeper in the home stack, whose deletes are conditional DeleteItems
// on the home region's item (expiresAt at or before the sweep's start).
//
// The scenario: a key is answered in the home region (eu) and its record
// replicates; past its retention (24 h) the same key is sent again, from
// the other region (us), and claimed anew in the home region, rightly (a
// new run), while us still holds the old, expired item. Responses are large
// enough to be stored as chunk items beside the record.
//
//   - "home sweeper" is the deployment: nothing deletes in us; the home
//     region's sweeper scans while the old record is expired and deletes
//     after the new claim has replaced it (the interleaving is forced): its
//     delete, conditional on the home item's expiry, fails, and it deletes
//     only the old response's chunk items. The new record replicates over
//     us's old item, and a duplicate of the new request replays in both
//     regions; after the new record's own retention the sweeper deletes it
//     and its chunks, the deletes replicate, and the key runs a third time:
//     the handler ran exactly once per retention period.
//   - "TTL in a replica" is why TTL stays off: the same scenario with us's
//     TTL deleting the old item it still holds (made as the unconditional
//     delete TTL issues) before the new claim reaches us. The delete is the
//     later write, replication applies it in the home region too, the new
//     record is gone, and a duplicate of the new request, well within its
//     retention, runs the handler again. The proof above, run with this
//     deleter in place of the home sweeper, fails the same way.
func TestLayer1HomePinnedTTLDeleteFromAReplica(t *testing.T) {
	t.Run("home sweeper", func(t *testing.T) {
		w := newTTLWorld(t)
		w.firstRunEverywhere()
		w.clock.Advance(25 * time.Hour) // past the record's retention (24 h)

		// The home region's sweeper (its table: the home replica) scans the
		// expired record; before it deletes, the key is sent again from us
		// and claimed anew in the home region.
		var reused sync.Once
		sw := &sweeper.Sweeper{API: scanHook{API: w.p.db(eu), after: func() {
			reused.Do(func() {
				if code, b := w.post(us); code != http.StatusCreated || !strings.Contains(b, "run-2") {
					t.Errorf("the key after its retention: %d %.80s (want a new run)", code, b)
				}
			})
		}}, Table: w.p.tables[eu], Concurrency: 1}
		oldChunks := w.chunkKeys(eu)
		r, err := sw.SweepUntil(ctx(t), w.clock.Now(), nil)
		if err != nil || !r.Complete {
			t.Fatalf("sweep: %+v %v", r, err)
		}
		if w.runs.Load() != 2 {
			t.Fatalf("handler runs %d, want 2 (the key reused during the sweep)", w.runs.Load())
		}
		// It deleted the old response's chunk items only: the record's
		// delete was conditional on the home item, now the new record.
		if r.Deleted != len(oldChunks) || r.Expired != 1+len(oldChunks) {
			t.Fatalf("sweep %+v, want the %d old chunk items deleted and the record kept", r, len(oldChunks))
		}
		if rec := w.record(eu); rec.Expires.Before(w.clock.Now()) {
			t.Fatalf("home record expires %v: the new claim's record is gone", rec.Expires)
		}
		w.replicate()
		for _, k := range oldChunks {
			if got := get(t, w.p.db(us), w.p.tables[us], k); got != nil {
				t.Fatalf("old chunk item %v still in us", k)
			}
		}

		// Duplicates of the second request, a minute after it, in both regions.
		w.clock.Advance(time.Minute)
		for _, r := range []string{eu, us} {
			if code, b := w.post(r); w.runs.Load() != 2 || code != http.StatusCreated || !strings.Contains(b, "run-2") {
				t.Fatalf("duplicate in %s: %d %.80s, handler runs %d; want a replay of run-2", r, code, b, w.runs.Load())
			}
		}

		// After the second record's retention the sweeper deletes it and
		// its chunks; the deletes replicate and the key is a new request.
		w.clock.Advance(25 * time.Hour)
		sw.API = w.p.db(eu)
		if r, err := sw.SweepUntil(ctx(t), w.clock.Now(), nil); err != nil || r.Deleted != r.Expired || r.Deleted < 2 {
			t.Fatalf("second sweep: %+v %v", r, err)
		}
		w.replicate()
		for _, r := range []string{eu, us} {
			if n := len(scanAll(t, w.p, r)); n != 0 {
				t.Fatalf("%s holds %d items after the sweep, want none", r, n)
			}
		}
		if code, b := w.post(us); w.runs.Load() != 3 || code != http.StatusCreated || !strings.Contains(b, "run-3") {
			t.Fatalf("the key after the second retention: %d %.80s, handler runs %d", code, b, w.runs.Load())
		}
	})

	t.Run("TTL in a replica", func(t *testing.T) {
		w := newTTLWorld(t)
		w.firstRunEverywhere()
		w.clock.Advance(25 * time.Hour)
		if code, b := w.post(us); code != http.StatusCreated || !strings.Contains(b, "run-2") {
			t.Fatalf("the key after its retention: %d %.80s (want a new run)", code, b)
		}
		w.step() // the home region's new record observed, not yet in us (lag)
		// TTL in us deletes the expired record it still holds.
		if _, err := w.p.db(us).DeleteItem(ctx(t), &dynamodb.DeleteItemInput{TableName: aws.String(w.p.tables[us]),
			Key: map[string]types.AttributeValue{"pk": onlyRecord(t, w.p, us)["pk"]}}); err != nil {
			t.Fatal(err)
		}
		w.replicate()

		// A duplicate of the second request, a minute after it.
		w.clock.Advance(time.Minute)
		code, b := w.post(eu)
		if w.runs.Load() != 3 || code != http.StatusCreated || !strings.Contains(b, "run-3") {
			t.Fatalf("duplicate after us's TTL delete replicated: %d %.80s, handler runs %d; a TTL delete in a replica no longer "+
				"removes the home region's record: update MULTI_REGION.md and this test", code, b, w.runs.Load())
		}
	})
}

// ttlWorld is two regions' api functions wired as under fenced-effects
// (the home region's replica from every region) over a replicated
// IdempotencyTable.
type ttlWorld struct {
	t     *testing.T
	p     *pair
	clock *ledgertest.Clock
	rep   *regionsim.Replicator
	runs  atomic.Int32
	srv   map[string]*httptest.Server
}

func newTTLWorld(t *testing.T) *ttlWorld {
	w := &ttlWorld{t: t, p: newPair(t, "IdempotencyTable"), clock: ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)),
		srv: map[string]*httptest.Server{}}
	var err error
	if w.rep, err = newReplicator(t, regionsim.Config{A: w.p.region(eu), B: w.p.region(us), Lag: time.Second, Now: w.clock.Now}); err != nil {
		t.Fatal(err)
	}
	// A response too large to be stored inline: chunk items beside the
	// record, carrying its expiry.
	pad := sha256.Sum256([]byte("pad"))
	var sb strings.Builder
	for range 40 {
		pad = sha256.Sum256(pad[:])
		sb.WriteString(hex.EncodeToString(pad[:]))
	}
	for _, r := range []string{eu, us} {
		st, err := idemdynamo.New(idemdynamo.Config{Client: kit.HomeClient(w.p.db(r), eu), Table: w.p.tables[eu]})
		if err != nil {
			t.Fatal(err)
		}
		g, err := idem.New(idem.Config{Store: st, HTTPTenant: func(*http.Request) (string, bool) { return "acme", true },
			Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			Test:   idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: w.clock.Now}}})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("POST /runs", g.Middleware(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			n := w.runs.Add(1)
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(rw, `{"runId":"acme/run-`+strconv.Itoa(int(n))+`-0123456789abcdef","pad":"`+sb.String()+`"}`)
		})))
		w.srv[r] = httptest.NewServer(mux)
		t.Cleanup(w.srv[r].Close)
	}
	return w
}

func (w *ttlWorld) post(r string) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, w.srv[r].URL+"/runs", strings.NewReader(`{"workflow":"w1"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(idem.HeaderKey, key1)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (w *ttlWorld) step() {
	w.t.Helper()
	if _, err := w.rep.Step(ctx(w.t)); err != nil {
		w.t.Fatal(err)
	}
	w.clock.Advance(10 * time.Millisecond)
}

// replicate delivers every write made so far to the other replica.
func (w *ttlWorld) replicate() {
	w.t.Helper()
	w.step()
	w.clock.Advance(2 * time.Second)
	if err := w.rep.Sync(ctx(w.t)); err != nil {
		w.t.Fatal(err)
	}
}

// firstRunEverywhere answers the key in the home region and replicates its
// record and chunk items to us.
func (w *ttlWorld) firstRunEverywhere() {
	w.t.Helper()
	if code, b := w.post(eu); code != http.StatusCreated || !strings.Contains(b, "run-1") {
		w.t.Fatalf("first request: %d %.80s", code, b)
	}
	w.replicate()
	if n, c := len(scanAll(w.t, w.p, us)), len(w.chunkKeys(eu)); c == 0 || n != 1+c {
		w.t.Fatalf("us holds %d items, want the replicated record and its %d chunk items (at least one)", n, c)
	}
}

// record is the Layer-1 record in region r's replica.
func (w *ttlWorld) record(r string) idem.Record {
	w.t.Helper()
	rec, err := idemdynamo.DecodeItem(onlyRecord(w.t, w.p, r))
	if err != nil {
		w.t.Fatal(err)
	}
	return rec
}

// chunkKeys are the keys of the items in region r's replica that are not a
// Layer-1 record (a response's chunk items).
func (w *ttlWorld) chunkKeys(r string) []map[string]types.AttributeValue {
	w.t.Helper()
	var out []map[string]types.AttributeValue
	for _, it := range scanAll(w.t, w.p, r) {
		if _, err := idemdynamo.DecodeItem(it); err != nil {
			out = append(out, map[string]types.AttributeValue{"pk": it["pk"]})
		}
	}
	return out
}

// scanHook is a sweeper.API that runs after once each Scan page has been
// read, before the sweeper deletes what the page showed.
type scanHook struct {
	sweeper.API
	after func()
}

func (h scanHook) Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := h.API.Scan(ctx, in, optFns...)
	if err == nil {
		h.after()
	}
	return out, err
}
