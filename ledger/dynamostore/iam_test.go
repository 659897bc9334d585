package dynamostore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// grant is one IAM action on one resource of the effects table: "table"
// (its ARN) or "index/byRun" (its byRun index's ARN).
type grant struct{ action, resource string }

// recorder is the store's API on a real client, recording every call as
// the grant it needs: the only way the store reaches DynamoDB.
type recorder struct {
	api dynamostore.API
	mu  sync.Mutex
	got map[grant]bool
	// failPut fails the next PutItem before it is sent (a process killed
	// before its outcome write).
	failPut bool
}

func (r *recorder) note(action string, index *string) {
	res := "table"
	if aws.ToString(index) != "" {
		res = "index/" + aws.ToString(index)
	}
	r.mu.Lock()
	r.got[grant{"dynamodb:" + action, res}] = true
	r.mu.Unlock()
}

func (r *recorder) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	r.note("PutItem", nil)
	r.mu.Lock()
	fail := r.failPut
	r.failPut = false
	r.mu.Unlock()
	if fail {
		return nil, errors.New("injected: process killed before the outcome write")
	}
	return r.api.PutItem(ctx, in, o...)
}

func (r *recorder) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.note("GetItem", nil)
	return r.api.GetItem(ctx, in, o...)
}

func (r *recorder) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	r.note("Query", in.IndexName)
	return r.api.Query(ctx, in, o...)
}

// documented returns the grants docs/DEPLOYING.md and docs/effects-table.yaml
// state for a ledger worker (both are generated from these lists).
func documented() map[grant]bool {
	out := map[grant]bool{}
	for _, a := range dynamostore.IAMActions {
		out[grant{a, "table"}] = true
	}
	for _, a := range dynamostore.IndexIAMActions {
		out[grant{a, "index/" + dynamostore.IndexByRun}] = true
	}
	return out
}

// The IAM actions the deploy guide documents for a ledger worker are
// exactly the calls the store makes: statically, the methods of the store's
// API (plus Scan, operator tooling only) are the documented actions; and on
// every emulator, a worker's whole life — a first effect, its duplicate from
// another run (a run reference), an executor that crashes mid-call, the
// reclaim after its lease, an escaped effect resolved by an operator, and
// the witness of each run — calls exactly the documented actions on exactly
// the documented resources (the byRun Query on the index, never the table).
func TestDeployDocLedgerIAMActionsAreTheStoreCalls(t *testing.T) {
	var methods []string
	for _, ty := range []reflect.Type{reflect.TypeFor[dynamostore.API](), reflect.TypeFor[dynamostore.ScanAPI]()} {
		for i := range ty.NumMethod() {
			methods = append(methods, "dynamodb:"+ty.Method(i).Name)
		}
	}
	slices.Sort(methods)
	all := slices.Sorted(slices.Values(slices.Concat(dynamostore.IAMActions, dynamostore.IndexIAMActions, dynamostore.ScanIAMActions)))
	if !slices.Equal(methods, all) {
		t.Fatalf("the store's API calls %v; IAMActions, IndexIAMActions and ScanIAMActions list %v", methods, all)
	}

	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		rec := &recorder{api: e.Client(), got: map[grant]bool{}}
		st, err := dynamostore.New(dynamostore.Config{Client: rec, Table: e.CreateTable(t, "EffectsTable")})
		if err != nil {
			t.Fatal(err)
		}
		clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
		l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, WitnessDuplicates: true,
			Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clock.Now}}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		run1, run2 := "acme/run-0123456789abcdef", "acme/run-fedcba9876543210"
		ok := func(context.Context, ledger.Call) ([]byte, error) { return []byte("done"), nil }

		// A first effect and its duplicate from another run.
		refund := business(t, "iam-refund")
		refund.RunID = run1
		if _, err := l.Do(ctx, refund, ok); err != nil {
			t.Fatal(err)
		}
		dup := refund
		dup.RunID, dup.NodeID = run2, "compensate"
		if r, err := l.Do(ctx, dup, ok); err != nil || !r.Replayed {
			t.Fatalf("duplicate: %+v %v", r, err)
		}

		// An executor that may have reached the provider, then an escaped
		// effect settled by an operator; another whose executor died
		// mid-call, reclaimed after its lease.
		charge := business(t, "iam-charge")
		charge.RunID = run1
		if _, err := l.Do(ctx, charge, func(context.Context, ledger.Call) ([]byte, error) {
			return nil, ledger.Uncertain(errors.New("connection reset"))
		}); err == nil {
			t.Fatal("an uncertain attempt reported success")
		}
		cur, err := l.Lookup(ctx, charge.Identity.EffectID)
		if err != nil || cur == nil {
			t.Fatalf("lookup: %v %v", cur, err)
		}
		if _, err := l.Resolve(ctx, charge.Identity.EffectID, ledger.Resolution{As: ledger.Delivered, Operator: "ops@example.com",
			Rev: l.View(cur, clock.Now()).Rev}); err != nil {
			t.Fatal(err)
		}
		crash := business(t, "iam-crash")
		crash.RunID = run1
		if _, err := l.Do(ctx, crash, func(context.Context, ledger.Call) ([]byte, error) {
			rec.mu.Lock()
			rec.failPut = true
			rec.mu.Unlock()
			return []byte("sent"), nil
		}); err == nil {
			t.Fatal("Do succeeded although its outcome write failed")
		}
		clock.Advance(time.Minute)
		_, _ = l.Do(ctx, crash, ok) // the reclaim (the attempt is escaped or retried: either way, these calls)

		for _, run := range []string{run1, run2} {
			if p, err := l.Witness(ctx, run); err != nil || len(p.Effects) == 0 {
				t.Fatalf("witness of %s: %+v %v", run, p, err)
			}
		}
		if want := documented(); !reflect.DeepEqual(rec.got, want) {
			t.Fatalf("a ledger worker called %v; the deploy guide grants %v", rec.got, want)
		}
	})
}

// snippetWorkerGrants returns the grants docs/effects-table.yaml gives its
// ledger worker (RefundsFunction) on the effects table: "table" for the
// table's ARN, "index/NAME" for an index's.
func snippetWorkerGrants(t *testing.T) map[grant]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(shared.ModuleRoot(), "docs", "effects-table.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resources map[string]struct {
			Properties struct {
				Policies []struct {
					Statement []struct {
						Action   []string  `yaml:"Action"`
						Resource yaml.Node `yaml:"Resource"`
					} `yaml:"Statement"`
				} `yaml:"Policies"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	fn, ok := doc.Resources["RefundsFunction"]
	if !ok {
		t.Fatal("docs/effects-table.yaml has no RefundsFunction")
	}
	out := map[grant]bool{}
	for _, p := range fn.Properties.Policies {
		for _, s := range p.Statement {
			res := s.Resource.Value
			switch {
			case s.Resource.Tag == "!GetAtt" && res == "EffectsTable.Arn":
				res = "table"
			case s.Resource.Tag == "!Sub" && strings.HasPrefix(res, "${EffectsTable.Arn}/"):
				res = strings.TrimPrefix(res, "${EffectsTable.Arn}/")
			default:
				t.Fatalf("RefundsFunction grants on %s %q: not the effects table", s.Resource.Tag, res)
			}
			for _, a := range s.Action {
				out[grant{a, res}] = true
			}
		}
	}
	return out
}

// The snippet's ledger worker is granted exactly what a worker like
// examples/refunds calls through its whole life (Ledger.Do only: a first
// effect, its duplicate, an uncertain attempt, a crash before the outcome
// write, a redelivery waiting on the live claim and the reclaim after the
// lease), on every emulator: a grant it
// never uses fails here as a missing one does.
func TestEffectsSnippetWorkerGrantsAreItsCalls(t *testing.T) {
	granted := snippetWorkerGrants(t)
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		rec := &recorder{api: e.Client(), got: map[grant]bool{}}
		st, err := dynamostore.New(dynamostore.Config{Client: rec, Table: e.CreateTable(t, "EffectsTable")})
		if err != nil {
			t.Fatal(err)
		}
		clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
		l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: 5 * time.Second,
			Test: ledger.TestConfig{Clock: clock.SleepAdvances()}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		ok := func(context.Context, ledger.Call) ([]byte, error) { return []byte("done"), nil }

		refund := business(t, "snippet-refund")
		if _, err := l.Do(ctx, refund, ok); err != nil {
			t.Fatal(err)
		}
		if r, err := l.Do(ctx, refund, ok); err != nil || !r.Replayed {
			t.Fatalf("duplicate: %+v %v", r, err)
		}
		if _, err := l.Do(ctx, business(t, "snippet-uncertain"), func(context.Context, ledger.Call) ([]byte, error) {
			return nil, ledger.Uncertain(errors.New("connection reset"))
		}); err == nil {
			t.Fatal("an uncertain attempt reported success")
		}
		crash := business(t, "snippet-crash")
		if _, err := l.Do(ctx, crash, func(context.Context, ledger.Call) ([]byte, error) {
			rec.mu.Lock()
			rec.failPut = true
			rec.mu.Unlock()
			return []byte("sent"), nil
		}); err == nil {
			t.Fatal("Do succeeded although its outcome write failed")
		}
		// Its redelivery while the claim is live waits, rereading the
		// record, then gives up; after the lease it reclaims.
		var inFlight *ledger.InFlightError
		if _, err := l.Do(ctx, crash, ok); !errors.As(err, &inFlight) {
			t.Fatalf("a duplicate of a live claim: %v, want *ledger.InFlightError", err)
		}
		clock.Advance(time.Minute)
		_, _ = l.Do(ctx, crash, ok)

		if !reflect.DeepEqual(rec.got, granted) {
			t.Fatalf("a ledger worker called %v; docs/effects-table.yaml grants it %v", rec.got, granted)
		}
	})
}
