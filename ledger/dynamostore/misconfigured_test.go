package dynamostore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
)

func randHex() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// countMetrics counts Metrics.Count calls by name.
type countMetrics struct {
	mu sync.Mutex
	n  map[string]float64
}

func (m *countMetrics) Count(name string, n float64, _ map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]float64{}
	}
	m.n[name] += n
}

func (m *countMetrics) get(name string) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[name]
}

// TestMisconfiguredEffectsTable: on every engine, a ledger whose effects
// table does not exist, or was created with another key schema (keyed on
// id, where the store writes pk and sk), fires nothing and
// returns ErrStoreMisconfigured on every Do and FireOnce, counts each one
// and logs the problem and its fix once.
func TestMisconfiguredEffectsTable(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client(dynamotest.FastRetries)
		for _, tc := range []struct {
			name  string
			table func(t *testing.T) string
		}{
			{"MissingTable", func(*testing.T) string { return "NoSuchEffects-" + randHex() }},
			{"WrongKeySchema", func(t *testing.T) string {
				name := "WrongKeys-" + randHex()
				if _, err := c.CreateTable(context.Background(), &dynamodb.CreateTableInput{TableName: aws.String(name),
					AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
					KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
					BillingMode:          types.BillingModePayPerRequest}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
				})
				return name
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var logs testutil.SyncBuffer
				m := &countMetrics{}
				l, err := ledger.New(ledger.Config{Store: newStore(t, c, tc.table(t)), Wait: -1,
					Metrics: m, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
				if err != nil {
					t.Fatal(err)
				}
				calls := 0
				for i := 0; i < 3; i++ {
					_, err := l.Do(context.Background(), business(t, "misconf-"+tc.name), func(context.Context, ledger.Call) ([]byte, error) {
						calls++
						return nil, nil
					})
					if !errors.Is(err, ledger.ErrStoreMisconfigured) {
						t.Fatalf("Do %d: %v; want ErrStoreMisconfigured", i, err)
					}
				}
				_, err = l.FireOnce(context.Background(), identity.Slot{Job: "nightly", Slot: "2026-12-03"}, func(context.Context) error {
					calls++
					return nil
				})
				if !errors.Is(err, ledger.ErrStoreMisconfigured) {
					t.Fatalf("FireOnce: %v; want ErrStoreMisconfigured", err)
				}
				if calls != 0 {
					t.Fatalf("the effect fired %d times", calls)
				}
				if got := m.get(ledger.MetricStoreMisconfigured); got != 4 {
					t.Errorf("%s = %v, want 4", ledger.MetricStoreMisconfigured, got)
				}
				if n := strings.Count(logs.String(), "idemkit doctor"); n != 1 || !strings.Contains(logs.String(), "EffectsTable") {
					t.Errorf("the fix is logged %d times (want once, naming EffectsTable):\n%s", n, logs.String())
				}
			})
		}
	})
}
