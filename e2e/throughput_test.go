package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/testutil"
)

// BenchmarkDevThroughput measures `idemkit dev` on moto with 32 concurrent
// clients each posting new-key runs (POST /runs, conformance-noop) for
// 10 s, and, on the same moto process, the raw rate of conditional PutItems
// from 32 concurrent clients. Reported: runs/s, putitems/s and their ratio
// (the goal is at least one half). Run:
// go test -run '^$' -bench DevThroughput -benchtime 1x ./e2e/
func BenchmarkDevThroughput(b *testing.B) {
	const clients, window = 32, 10 * time.Second
	ctx := context.Background()
	srv, err := emulator.Start(ctx, emulator.Moto, emulator.Options{})
	if err != nil && strings.Contains(err.Error(), "not on PATH") {
		testutil.Unavailable(b, "moto: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	if _, err := os.Stat(shared.ModuleRoot()); err != nil {
		b.Fatal(err)
	}
	bin := buildHost(b, b.TempDir(), "idemkit", "cmd/idemkit")
	addr := testutil.FreeAddr(b)
	p := start(b, os.Environ(), bin, "dev", "--addr", addr, "--dynamodb-endpoint", srv.Endpoint, "--api-key", devKey+"=e2e-tenant")
	url := "http://" + addr
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	err = testutil.WaitHTTP(wctx, url+"/.well-known/openwop", p.Done())
	cancel()
	if err != nil {
		b.Fatalf("idemkit dev not ready: %v\n%s", err, p.Log.String())
	}

	// The same concurrency, the same engine: raw conditional PutItems.
	c := emulator.Client(srv.Endpoint)
	table := "raw-putitem"
	if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(table), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		b.Fatal(err)
	}
	run := func(one func(worker, i int) error) float64 {
		var n atomic.Int64
		var wg sync.WaitGroup
		deadline := time.Now().Add(window)
		start := time.Now()
		for w := 0; w < clients; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(deadline); i++ {
					if err := one(w, i); err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(start).Seconds()
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	nonce := time.Now().UnixNano()
	b.ResetTimer()
	runs := run(func(w, i int) error {
		req, _ := http.NewRequest("POST", url+"/runs", strings.NewReader(`{"workflowId":"conformance-noop","inputs":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", testutil.Bearer(devKey))
		req.Header.Set("Idempotency-Key", fmt.Sprintf("tp-%d-%02d-%08d-0123456789", nonce, w, i))
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			return fmt.Errorf("POST /runs: %d", resp.StatusCode)
		}
		return nil
	})
	puts := run(func(w, i int) error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("%d-%02d-%08d", nonce, w, i)},
				"v":  &types.AttributeValueMemberS{Value: "x"},
			},
			ConditionExpression:      aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames: map[string]string{"#k": "pk"},
		})
		return err
	})
	b.StopTimer()
	b.ReportMetric(runs, "runs/s")
	b.ReportMetric(puts, "putitems/s")
	b.ReportMetric(runs/puts, "ratio")
	b.ReportMetric(0, "ns/op")
}
