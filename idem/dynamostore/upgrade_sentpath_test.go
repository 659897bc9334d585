package dynamostore_test

import (
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// pinStrippedEarlier is the fingerprint the code before RED_TEAM 533 wrote
// for POST {"qty":1} (application/json) on a ServeMux route POST /orders
// behind http.StripPrefix("/a"), sent to /a/orders, and for the same
// request sent to /orders with no prefix stripped (computed on that code:
// the two were one).
const pinStrippedEarlier = "request-sha256-v1:yJFdN6TgboAmLroioP0x4T0iQm5dUOCoUK67MK42uf4"

// idRecorder records the ID and digest of every claim.
type idRecorder struct {
	idem.Store
	ids, digests []string
}

func (r *idRecorder) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	r.ids, r.digests = append(r.ids, rec.ID), append(r.digests, rec.Digest)
	return r.Store.Claim(ctx, rec, now)
}

// TestStrippedPrefixRecordAcrossTheUpgrade: records of a request whose path
// http.StripPrefix rewrote, written by the release before RED_TEAM 533 (the
// item hand-built: the previous layout's inline blob with respEnc, respSha
// and respLen, and that release's fingerprint, pinned), are served by
// today's code as docs/GUARANTEES.md's upgrade note says, on the memory
// store and every engine:
//   - the retry to /a/orders is 409 idempotency_key_mismatch, never run;
//   - the earlier release's own retry (a rolling deploy: it computes the
//     fingerprint without the sent path) replays the record byte-exact;
//   - a request of the same key and body to /orders, no prefix stripped,
//     replays it too, as before the upgrade (the record does not say which
//     of the two wrote it);
//
// and a record today's code writes for /a/orders is refused, never run
// and never replayed, by the earlier release's retry (a rollback), and
// replayed to today's.
func TestStrippedPrefixRecordAcrossTheUpgrade(t *testing.T) {
	t.Run("memstore", func(t *testing.T) {
		st := memstore.New()
		strippedAcrossTheUpgrade(t, st, func(t *testing.T, id string, now time.Time) {
			rec := idem.Record{ID: id, Digest: pinStrippedEarlier, State: idem.StatePending, Owner: "old-owner",
				LeaseExpires: now.Add(time.Minute), RequestID: "req-old", Expires: now.Add(24 * time.Hour)}
			if res, err := st.Claim(context.Background(), rec, now); err != nil || res.Decision != idem.Claimed {
				t.Fatalf("claim: %v %v", res.Decision, err)
			}
			rec.Attempt = 1
			if err := st.Complete(context.Background(), rec, idem.Outcome{State: idem.StateCompleted, Expires: now.Add(24 * time.Hour),
				Response: &idem.Response{Status: 201, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"app":"a"}`)}}, now); err != nil {
				t.Fatal(err)
			}
		})
	})
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		table := e.CreateTable(t, "IdempotencyTable")
		st, err := dynamostore.New(dynamostore.Config{Client: e.Client(dynamotest.FastRetries), Table: table})
		if err != nil {
			t.Fatal(err)
		}
		strippedAcrossTheUpgrade(t, st, func(t *testing.T, id string, now time.Time) {
			// Format v1, raw: status 201, one header, then the body.
			blob := []byte{1, 0xc9, 0x01, 1, 12}
			blob = append(blob, "Content-Type"...)
			blob = append(blob, 1, 16)
			blob = append(blob, "application/json"...)
			blob = append(blob, `{"app":"a"}`...)
			sum := sha256.Sum256(blob)
			exp := now.Add(24 * time.Hour)
			item := map[string]types.AttributeValue{
				"pk": s(id), "digest": s(pinStrippedEarlier), "state": s("completed"), "owner": s("old-owner"),
				"attempt": n(1), "requestId": s("req-old"), "expiresAtMs": n(exp.UnixMilli()), "expiresAt": n(exp.Unix() + 1),
				"status": n(201), "resp": &types.AttributeValueMemberB{Value: blob}, "respEnc": s("raw"),
				"respSha": &types.AttributeValueMemberB{Value: sum[:]}, "respLen": n(int64(len(blob))),
			}
			if _, err := e.Client().PutItem(ctxT(t), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// strippedAcrossTheUpgrade runs TestStrippedPrefixRecordAcrossTheUpgrade on
// st; put writes the earlier release's record of the given ID.
func strippedAcrossTheUpgrade(t *testing.T, st idem.Store, put func(t *testing.T, id string, now time.Time)) {
	rec := &idRecorder{Store: st}
	g, err := idem.New(idem.Config{Store: rec, Wait: -1,
		HTTPTenant: func(*http.Request) (string, bool) { return "tenant-a", true },
		Logger:     slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	root := http.NewServeMux()
	for _, app := range []string{"a", ""} {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /orders", func(w http.ResponseWriter, _ *http.Request) {
			runs[app]++
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(201)
			_, _ = w.Write([]byte(`{"app":"` + app + `","today":true}`))
		})
		if app == "" {
			root.Handle("/", g.Middleware(mux))
		} else {
			root.Handle("/a/", http.StripPrefix("/a", g.Middleware(mux)))
		}
	}
	// earlier is a request as the release before 533 fingerprinted it:
	// without the path the client sent (as a request made in the process,
	// with no RequestURI, still is).
	post := func(path, key string, earlier bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, key)
		if earlier {
			req.RequestURI = ""
		}
		w := httptest.NewRecorder()
		root.ServeHTTP(w, req)
		return w
	}
	const key = "k_0123456789abcdefghijkl"
	// The record's ID, as both releases name it: the earlier release's
	// request on another store.
	pr := &idRecorder{Store: memstore.New()}
	probe, err := idem.New(idem.Config{Store: pr, Wait: -1,
		HTTPTenant: func(*http.Request) (string, bool) { return "tenant-a", true },
		Logger:     slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	pm := http.NewServeMux()
	pm.HandleFunc("POST /orders", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(201) })
	preq := httptest.NewRequest("POST", "/a/orders", strings.NewReader(`{"qty":1}`))
	preq.Header.Set("Content-Type", "application/json")
	preq.Header.Set(idem.HeaderKey, key)
	preq.RequestURI = ""
	http.StripPrefix("/a", probe.Middleware(pm)).ServeHTTP(httptest.NewRecorder(), preq)
	if len(pr.ids) != 1 || pr.digests[0] != pinStrippedEarlier {
		t.Fatalf("the earlier release's fingerprint: %q, want [%s]", pr.digests, pinStrippedEarlier)
	}
	put(t, pr.ids[0], time.Now())

	isMismatch := func(name string, w *httptest.ResponseRecorder) {
		t.Helper()
		if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "idempotency_key_mismatch") {
			t.Fatalf("%s: %d %s, want 409 idempotency_key_mismatch", name, w.Code, w.Body)
		}
	}
	isReplay := func(name string, w *httptest.ResponseRecorder, body string) {
		t.Helper()
		if w.Code != 201 || w.Body.String() != body || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %d %v %s, want the recorded 201 %s", name, w.Code, w.Header(), w.Body, body)
		}
	}
	isMismatch("today's retry to /a/orders of the earlier release's record", post("/a/orders", key, false))
	isReplay("the earlier release's retry to /a/orders", post("/a/orders", key, true), `{"app":"a"}`)
	isReplay("the same key and body to /orders, nothing stripped", post("/orders", key, false), `{"app":"a"}`)
	if runs["a"]+runs[""] != 0 {
		t.Fatalf("handlers ran %v against the earlier release's record", runs)
	}

	// A rollback: today's record read by the earlier release.
	const key2 = "k_0123456789abcdefghijkm"
	first := post("/a/orders", key2, false)
	isReplay("today's first request", first, `{"app":"a","today":true}`)
	isMismatch("the earlier release's retry of today's record", post("/a/orders", key2, true))
	isMismatch("the same key and body to /orders against today's record", post("/orders", key2, false))
	isReplay("today's retry", post("/a/orders", key2, false), `{"app":"a","today":true}`)
	if runs["a"] != 1 || runs[""] != 0 {
		t.Fatalf("handlers ran %v, want a once", runs)
	}
}
