package apifn

// The retries of one failed run are capped before any write: the failed
// run's item lists them (runs.Run.Retries), and DynamoDB refuses an item
// past 400 KB, so an unbounded list made every later retry a 500 that
// left an unlisted pending run behind.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/runs/runstest"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/decided"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/itemsize"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// dynamoItemLimit is DynamoDB's item size limit, which DynamoDB Local, moto
// and dynalite enforce.
const dynamoItemLimit = 400 << 10

// retryCapHost is the api handler over the emulator's RunsTable and Layer-1
// table, the failed runs it retries written directly.
type retryCapHost struct {
	f      *fixture
	c      *dynamodb.Client
	rs     *runs.DynamoRuns
	tenant string
	cnt    *dynamotest.Counter // the calls of c (newRetryCapHost)
}

func newRetryCapHost(t *testing.T, e *dynamotest.Emulator) *retryCapHost {
	t.Helper()
	cnt := dynamotest.NewCounter()
	c := e.Client(dynamotest.FastRetries, cnt.Middleware())
	rs := &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
	st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
	if err != nil {
		t.Fatal(err)
	}
	// The longest tenant the grammar admits: the longest run ids.
	return &retryCapHost{f: hostOf(t, rs, idem.Config{Store: st}, nil), c: c, rs: rs, tenant: strings.Repeat("t", 128), cnt: cnt}
}

// largestFailed writes a failed run whose run options fill the largest
// body the host accepts, ended with the longest error the executor keeps.
func (h *retryCapHost) largestFailed(t *testing.T) runs.Run {
	t.Helper()
	ctx := context.Background()
	r := runs.NewRun(h.tenant, "conformance-noop", nil, time.Now())
	r.Options.Metadata = json.RawMessage(`{"pad":"` + strings.Repeat("x", runstest.LargestBody-len(`{"pad":""}`)) + `"}`)
	if err := h.rs.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	r, err := h.rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusFailed, strings.Repeat("e", 512), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// list adds n run ids of the longest shape to the failed run's retries,
// as n retries before would have.
func (h *retryCapHost) list(t *testing.T, failed string, from, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, 200)
		if err := h.add(failed, from, k); err != nil {
			t.Fatal(err)
		}
		from, n = from+k, n-k
	}
}

// add lists k run ids of the longest shape, numbered from from, on the
// failed run's retries in one update.
func (h *retryCapHost) add(failed string, from, k int) error {
	ids := make([]string, k)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s/%022d", h.tenant, from+i)
	}
	_, err := h.c.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(h.rs.Table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: failed}},
		UpdateExpression:          aws.String("ADD retries :r"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":r": &types.AttributeValueMemberSS{Value: ids}},
	})
	return err
}

// fill lists run ids of the longest shape on the failed run until its
// item is within one id of DynamoDB's item limit: as itemsize counts it,
// or, sooner, as the engine counts it when it refuses one more. Before
// RED_TEAM 578 itemsize counted a number by AWS's approximate rule, one
// byte short of DynamoDB Local and dynalite when its significant digits
// pair up on its decimal point, so the item's times (numbers of
// milliseconds) made a fill computed from itemsize alone cross the limit
// by a byte or two on some runs and not on others; the engine's refusal
// still bounds the fill. moto refuses no update for its size.
func (h *retryCapHost) fill(t *testing.T, failed string) {
	t.Helper()
	per := len(h.tenant) + 1 + 22
	// The first id listed also adds the set's name, "retries", to an item
	// that has none yet.
	target := (dynamoItemLimit - h.size(t, failed) - len("retries")) / per
	from, k := 0, 200
	for from < target && k > 0 {
		k = min(k, target-from)
		err := h.add(failed, from, k)
		var ae smithy.APIError
		switch {
		case err == nil:
			from += k
		case errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" && strings.Contains(strings.ToLower(ae.ErrorMessage()), "size"):
			k /= 2 // over the engine's limit: fewer ids, down to the one refused
		default:
			t.Fatal(err)
		}
	}
	if from < MaxRunRetries {
		t.Fatalf("the full run lists %d ids, fewer than the cap of %d", from, MaxRunRetries)
	}
}

func (h *retryCapHost) size(t *testing.T, id string) int {
	t.Helper()
	out, err := h.c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(h.rs.Table),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}}, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return itemsize.Of(out.Item)
}

func (h *retryCapHost) retry(t *testing.T, failed, key string) (ok bool, status int, m map[string]any) {
	t.Helper()
	r, m := h.f.do(t, ev("POST", "/runs/"+runs.ProjectID(failed)+"/retry", h.tenant, key, ""))
	return r.StatusCode == 201, r.StatusCode, m
}

// TestRetriesOfOneFailedRunAreCapped: the largest failed run of the
// longest tenant takes MaxRunRetries retries (each listed on it, its item
// still within DynamoDB's limit); one more, under a new key, is 409
// CodeRetryLimitReached with details {limit, retries}, before anything is
// written (no run created, nothing listed); a replay of a key that was
// answered 201 still answers its run. A failed run whose list is already
// near the item limit (retried before the cap existed) is refused the
// same way, never a 500 with a pending run left unlisted.
func TestRetriesOfOneFailedRunAreCapped(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		h := newRetryCapHost(t, e)
		failed := h.largestFailed(t)
		h.list(t, failed.ID, 0, MaxRunRetries-1)
		ok, status, m := h.retry(t, failed.ID, "k-retry-last-0123456789abcdef")
		if !ok {
			t.Fatalf("retry %d of %d: %d %v", MaxRunRetries, MaxRunRetries, status, m)
		}
		last, _ := m["runId"].(string)
		got, err := h.rs.Get(context.Background(), failed.ID)
		if err != nil || len(got.Retries) != MaxRunRetries {
			t.Fatalf("after %d retries the run lists %d (%v)", MaxRunRetries, len(got.Retries), err)
		}
		if n := h.size(t, failed.ID); n > dynamoItemLimit-32<<10 {
			t.Fatalf("the largest failed run with %d retries is an item of %d bytes, within 32 KiB of DynamoDB's limit", MaxRunRetries, n)
		}
		over := ev("POST", "/runs/"+runs.ProjectID(failed.ID)+"/retry", h.tenant, "k-retry-over-0123456789abcdef", "")
		h.cnt.Reset()
		refused, m := h.f.do(t, over)
		d, _ := m["details"].(map[string]any)
		if refused.StatusCode != 409 || m["error"] != CodeRetryLimitReached || d["limit"] != float64(MaxRunRetries) || d["retries"] != float64(MaxRunRetries) {
			t.Fatalf("retry %d: %d %v", MaxRunRetries+1, refused.StatusCode, m)
		}
		// A key's first execution wrote no run: the refusal reads the
		// failed run alone, never the key's own run id.
		if n := h.cnt.Ops()["GetItem"]; n != 1 {
			t.Fatalf("the refusal under a new key read %d items (%v); want the failed run alone", n, h.cnt.Ops())
		}
		finalRefusal(t, h.f, refused, over)
		if got, _ := h.rs.Get(context.Background(), failed.ID); len(got.Retries) != MaxRunRetries {
			t.Fatalf("the refused retry was listed: %d", len(got.Retries))
		}
		if ok, status, m = h.retry(t, failed.ID, "k-retry-last-0123456789abcdef"); !ok || m["runId"] != last {
			t.Fatalf("the replay of the last accepted retry: %d %v, want its run %s", status, m, last)
		}

		// A failed run retried past the cap before it existed, its item
		// within a retry of DynamoDB's limit.
		full := h.largestFailed(t)
		h.fill(t, full.ID)
		_, status, m = h.retry(t, full.ID, "k-retry-full-0123456789abcdef")
		if status != 409 || m["error"] != CodeRetryLimitReached {
			t.Fatalf("a retry of a run whose item is full: %d %v", status, m)
		}
		if r, m := h.f.do(t, ev("GET", "/runs/"+runs.ProjectID(full.ID), h.tenant, "", "")); r.StatusCode != 200 {
			t.Fatalf("GET the full run: %d %v", r.StatusCode, m)
		}
	})
}

// TestRetryKeyWhoseRunIsWrittenIsAnsweredAtTheCap: earlier versions wrote
// a retry's run before its listing on the failed run (without
// transactions). A run so written whose listing was then refused for an
// outage (the key answered 5xx, retryable) is pending and unlisted at the
// key's run id: retried after the failed run reached its cap through
// other keys, the key is answered 201 with that run, now listed, never
// 409 CodeRetryLimitReached while its run exists. One so written whose
// listing was refused at the cap was cancelled for it and its key
// answered 409: that key's re-execution (its 409's completion lost) is
// the 409 again, never 201 for the cancelled run. On every engine.
func TestRetryKeyWhoseRunIsWrittenIsAnsweredAtTheCap(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		faults := dynamotest.NewFaults()
		c := e.Client(dynamotest.FastRetries)
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
		if err != nil {
			t.Fatal(err)
		}
		seen := &createdIDs{RunStore: rs}
		h := &retryCapHost{f: hostOf(t, seen, idem.Config{Store: st}, nil), c: c, rs: rs, tenant: strings.Repeat("t", 128)}
		failed := h.largestFailed(t)
		h.list(t, failed.ID, 0, MaxRunRetries-2)
		// earlierRun is the run an earlier version wrote for key before
		// its listing: key's first execution here is interrupted before
		// any write (its listing throttled, answered 5xx), and its run id
		// is then written as that version wrote it, unlisted.
		earlierRun := func(key string) string {
			faults.FailNext("UpdateItem", 100, dynamotest.Throttle())
			if _, status, m := h.retry(t, failed.ID, key); status < 500 {
				t.Fatalf("a retry whose listing was refused: %d %v", status, m)
			}
			faults.Clear()
			id := seen.last()
			r := runs.NewRun(h.tenant, failed.WorkflowID, nil, time.Now())
			r.ID = id
			if err := rs.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
			if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(rs.Table),
				Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}},
				UpdateExpression:          aws.String("SET retryOf = :f"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":f": &types.AttributeValueMemberS{Value: failed.ID}},
			}); err != nil {
				t.Fatal(err)
			}
			return id
		}
		unlisted := earlierRun("k-retry-unlisted-0123456789ab")
		refusedKey := "k-retry-refused-0123456789abc"
		refused := earlierRun(refusedKey)
		// The stored value earlier versions gave a retry they cancelled
		// when the cap refused its listing.
		if _, err := rs.Cancel(ctx, refused, []runs.Status{runs.StatusPending}, "", "the failed run it retries already lists the most retries it can", time.Now()); err != nil {
			t.Fatal(err)
		}
		if got, _ := h.rs.Get(ctx, failed.ID); len(got.Retries) != MaxRunRetries-2 {
			t.Fatalf("the refused listings were written: %d", len(got.Retries))
		}
		for _, k := range []string{"k-retry-other-0123456789abcd", "k-retry-other2-0123456789abc"} {
			if ok, status, m := h.retry(t, failed.ID, k); !ok {
				t.Fatalf("a retry under another key: %d %v", status, m)
			}
		}
		ok, status, m := h.retry(t, failed.ID, "k-retry-unlisted-0123456789ab")
		if id, _ := m["runId"].(string); !ok || id != unlisted {
			t.Fatalf("the key whose run is written, at the cap: %d %v, want 201 naming %s", status, m, unlisted)
		}
		got, _ := h.rs.Get(ctx, failed.ID)
		if len(got.Retries) != MaxRunRetries+1 || !slices.Contains(got.Retries, unlisted) {
			t.Fatalf("after the key's answer the run lists %d retries (its run listed: %v)", len(got.Retries), slices.Contains(got.Retries, unlisted))
		}
		if _, status, m := h.retry(t, failed.ID, refusedKey); status != http.StatusConflict || m["error"] != CodeRetryLimitReached {
			t.Fatalf("the key whose run was cancelled at the cap: %d %v, want 409 %s", status, m, CodeRetryLimitReached)
		}
		if got, _ := h.rs.Get(ctx, failed.ID); slices.Contains(got.Retries, refused) {
			t.Fatal("the run cancelled at the cap was listed")
		}
	})
}

// createdIDs is a RunStore that notes the id of every run Create is asked
// to write.
type createdIDs struct {
	runs.RunStore
	mu  sync.Mutex
	ids []string
}

func (s *createdIDs) Create(ctx context.Context, r runs.Run) error {
	s.mu.Lock()
	s.ids = append(s.ids, r.ID)
	s.mu.Unlock()
	return s.RunStore.Create(ctx, r)
}

func (s *createdIDs) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ids) == 0 {
		return ""
	}
	return s.ids[len(s.ids)-1]
}

// TestForkChainsAreCapped: a fork records its ancestry (the source, the
// source's source, ... back to the run that is no fork), one entry more
// per generation, on its own item. A chain of forks of the largest run
// of the longest tenant is forked down to MaxForkDepth generations, the
// deepest fitting on every engine; forking that one is 422
// CodeForkDepthExceeded with details {limit, depth}, before anything is
// written. Before the cap every generation was accepted until the item
// passed DynamoDB's limit, and that fork, under every retry of its key,
// was a 500.
func TestForkChainsAreCapped(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		h := newRetryCapHost(t, e)
		cur := h.largestFailed(t)
		for i := 1; i < MaxForkDepth; i++ {
			cur = runs.NewFork(cur, runs.ForkReplay, 0, nil, time.Now())
			if err := h.rs.Create(context.Background(), cur); err != nil {
				t.Fatalf("generation %d: %v", i, err)
			}
		}
		fork := func(id, key string) (int, map[string]any) {
			r, m := h.f.do(t, ev("POST", "/runs/"+runs.ProjectID(id)+":fork", h.tenant, key, `{"mode":"replay"}`))
			return r.StatusCode, m
		}
		status, m := fork(cur.ID, "k-fork-deepest-0123456789abcdef")
		deepest, _ := m["runId"].(string)
		if status != 201 || deepest == "" {
			t.Fatalf("generation %d: %d %v", MaxForkDepth, status, m)
		}
		if got, err := h.rs.Get(context.Background(), deepest); err != nil || len(got.Fork.Ancestry) != MaxForkDepth {
			t.Fatalf("the deepest fork: %v", err)
		}
		over := ev("POST", "/runs/"+runs.ProjectID(deepest)+":fork", h.tenant, "k-fork-over-0123456789abcdefgh", `{"mode":"replay"}`)
		refused, m := h.f.do(t, over)
		d, _ := m["details"].(map[string]any)
		if refused.StatusCode != 422 || m["error"] != CodeForkDepthExceeded || d["limit"] != float64(MaxForkDepth) || d["depth"] != float64(MaxForkDepth+1) {
			t.Fatalf("generation %d: %d %v", MaxForkDepth+1, refused.StatusCode, m)
		}
		finalRefusal(t, h.f, refused, over)
	})
}

// TestStaleCancelIntoAFullInboxIsStillAnswered: a tenant's inbox is one
// RunsTable item; a stale cancel whose entry no longer fits it (DynamoDB's
// 400 KB) is answered the same 409 stale refusal without an inboxId (the
// write is not kept), never a 500 that every retry of its key repeats.
// The entries already waiting are kept, and the key's replay is that 409.
func TestStaleCancelIntoAFullInboxIsStillAnswered(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := newCommerceHost(t, e)
		run := c.run(t, runs.StatusRunning) // version 2: status changed since 1
		fill(t, c.runs.Client.(*dynamodb.Client), c.runs.Table, "#inbox/acme")
		r, m := c.f.do(t, decidedCancel(run.ID, 1, "offline cancel into a full inbox"))
		d, _ := m["details"].(map[string]any)
		if r.StatusCode != 409 || m["error"] != decided.CodeStale || d["inboxId"] != nil || strings.Contains(r.Body, "inbox") {
			t.Fatalf("stale cancel into a full inbox: %d %s", r.StatusCode, r.Body)
		}
		again, _ := c.f.do(t, decidedCancel(run.ID, 1, "offline cancel into a full inbox"))
		if again.StatusCode != 409 || again.Body != r.Body {
			t.Fatalf("same key: %d %s", again.StatusCode, again.Body)
		}
		if st := c.get(t, run.ID).Status; st != runs.StatusRunning {
			t.Fatalf("a refused cancel moved the run to %s", st)
		}
	})
}

// finalRefusal checks a refusal the run's state decides for good (a cap
// reached): its body is the OpenWOP error envelope (a vendor code of the
// registry's pattern), and, like every final 4xx under the OpenWOP
// default policy, it is the key's recorded answer: the same request again
// is that refusal replayed, byte for byte.
func finalRefusal(t *testing.T, f *fixture, refused events.APIGatewayV2HTTPResponse, req events.APIGatewayV2HTTPRequest) {
	t.Helper()
	envelope, err := wireschema.Load(t).Schema("error-envelope.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := wireschema.Validate(envelope, []byte(refused.Body)); err != nil {
		t.Fatalf("%d envelope %s: %v", refused.StatusCode, refused.Body, err)
	}
	again, _ := f.do(t, req)
	if again.StatusCode != refused.StatusCode || again.Body != refused.Body || again.Headers[idem.HeaderOpenWOPReplay] != "true" {
		t.Fatalf("the refused key again: %d %v %s; want its %d replayed", again.StatusCode, again.Headers, again.Body, refused.StatusCode)
	}
}

// fill pads item pk of table until the engine refuses even 100 bytes more
// (each engine counts an item's size its own way).
func fill(t *testing.T, c *dynamodb.Client, table, pk string) {
	t.Helper()
	n := 0
	for _, size := range []int{50 << 10, 10 << 10, 1 << 10, 100} {
		for {
			_, err := c.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
				TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
				UpdateExpression:          aws.String("SET #p = :p"),
				ExpressionAttributeNames:  map[string]string{"#p": fmt.Sprintf("pad%d", n)},
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: strings.Repeat("p", size)}},
			})
			if err != nil {
				break
			}
			n++
		}
	}
}
