// Command devpath measures the ceiling the API path of `idemkit dev` puts
// on its throughput, without the rest of the stack: from 32 concurrent
// clients (-c), the rate of the path a new-key POST /runs makes the engine
// answer — the Layer-1 claim (a conditional PutItem) and the completion
// transaction (the completed record and the run, both conditional) — on
// tables created from template.yaml (streams, TTL, the runs table's index),
// on tables with no stream, TTL or index, and on tables with a stream only;
// the same three writes as separate PutItems (no transaction); and the raw
// conditional PutItem rate of a plain table, which each rate is divided by
// (the denominator of `make bench-dev`). No executor and no stream reader
// run, so the ratio of the template row is the most the whole dev stack can
// reach on that engine with the guarantees as they are.
//
//	go run ./bench/devpath                        # DynamoDB Local, 32 clients, 6 s per shape
//	go run ./bench/devpath -engine moto -d 10s
//
// Shapes alternate in two rounds, the second in reverse order (AB, BA),
// after a one-second warm-up of each; the load average is printed with the
// figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/tables"
)

func main() {
	kind := flag.String("engine", emulator.DynamoDBLocal, "engine: "+strings.Join(emulator.Kinds, ", "))
	clients := flag.Int("c", 32, "concurrent clients")
	dur := flag.Duration("d", 6*time.Second, "time per shape and round")
	flag.Parse()
	if err := run(*kind, *clients, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "devpath:", err)
		os.Exit(1)
	}
}

func run(kind string, clients int, dur time.Duration) error {
	ctx := context.Background()
	srv, err := emulator.Start(ctx, kind, emulator.Options{ToolsDir: "tools", SharedDB: true})
	if err != nil {
		return err
	}
	defer srv.Stop()
	c := emulator.Client(srv.Endpoint)
	mk := func(name string, stream bool) error {
		in := &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}}}
		if stream {
			in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
		}
		_, err := c.CreateTable(ctx, in)
		return err
	}
	for name, stream := range map[string]bool{"raw-putitem": false, "plain-idem": false, "plain-runs": false, "stream-idem": true, "stream-runs": true} {
		if err := mk(name, stream); err != nil {
			return err
		}
	}
	if err := tables.Create(ctx, c, "IdempotencyTable", "idem"); err != nil {
		return err
	}
	if err := tables.Create(ctx, c, "RunsTable", "runs"); err != nil {
		return err
	}
	pad := strings.Repeat("x", 300)
	item := func(id string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}, "v": &types.AttributeValueMemberS{Value: pad}}
	}
	now := time.Now().UnixMilli()
	n := func(v int64) types.AttributeValue { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }
	sv := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	claimItem := func(id string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": sv(id), "digest": sv(pad[:90]), "state": sv("pending"), "owner": sv("o-" + id),
			"leaseAt": n(now + 30000), "renewedAt": n(now), "attempt": n(1), "requestId": sv("req-" + id), "expiresAtMs": n(now + 86400000), "expiresAt": n(now/1000 + 86401)}
	}
	claim := func(tIdem, id string) error {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tIdem), Item: claimItem(id),
			ConditionExpression: aws.String("attribute_not_exists(#k) OR #e <= :n"), ExpressionAttributeNames: map[string]string{"#k": "pk", "#e": "expiresAtMs"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": n(now)}, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
		return err
	}
	completion := func(tIdem, id string) *types.Put {
		it := claimItem(id)
		delete(it, "leaseAt")
		delete(it, "renewedAt")
		it["state"], it["resp"] = sv("completed"), &types.AttributeValueMemberB{Value: []byte(pad[:150])}
		return &types.Put{TableName: aws.String(tIdem), Item: it, ConditionExpression: aws.String("#o = :o AND #s = :p AND NOT #e <= :n"),
			ExpressionAttributeNames:            map[string]string{"#o": "owner", "#s": "state", "#e": "expiresAtMs"},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":o": sv("o-" + id), ":p": sv("pending"), ":n": n(now)},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
	}
	runPut := func(tRuns, id string) *types.Put {
		return &types.Put{TableName: aws.String(tRuns), Item: map[string]types.AttributeValue{"pk": sv("run-" + id), "tenant": sv("t"), "workflowId": sv("conformance-noop"),
			"status": sv("pending"), "createdAt": n(now), "updatedAt": n(now), "version": n(1), "inputs": sv("{}")},
			ConditionExpression: aws.String("attribute_not_exists(#0)"), ExpressionAttributeNames: map[string]string{"#0": "pk"}}
	}
	devPath := func(tIdem, tRuns string) func(id string) error {
		return func(id string) error {
			if err := claim(tIdem, id); err != nil {
				return err
			}
			_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: completion(tIdem, id)}, {Put: runPut(tRuns, id)}}})
			return err
		}
	}
	noTx := func(tIdem, tRuns string) func(id string) error {
		return func(id string) error {
			if err := claim(tIdem, id); err != nil {
				return err
			}
			p := completion(tIdem, id)
			if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: p.TableName, Item: p.Item, ConditionExpression: p.ConditionExpression,
				ExpressionAttributeNames: p.ExpressionAttributeNames, ExpressionAttributeValues: p.ExpressionAttributeValues}); err != nil {
				return err
			}
			r := runPut(tRuns, id)
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: r.TableName, Item: r.Item, ConditionExpression: r.ConditionExpression, ExpressionAttributeNames: r.ExpressionAttributeNames})
			return err
		}
	}
	shapes := []struct {
		name string
		f    func(id string) error
	}{
		{"conditional PutItem, plain table", func(id string) error {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("raw-putitem"), Item: item(id), ConditionExpression: aws.String("attribute_not_exists(pk)")})
			return err
		}},
		{"dev API path (claim, completion tx), template tables", devPath("idem", "runs")},
		{"dev API path, tables without stream/TTL/index", devPath("plain-idem", "plain-runs")},
		{"dev API path, stream-only tables", devPath("stream-idem", "stream-runs")},
		{"claim, completion, run as 3 PutItems, template tables", noTx("idem", "runs")},
		{"claim, completion, run as 3 PutItems, plain tables", noTx("plain-idem", "plain-runs")},
	}
	var seq atomic.Int64
	var errOnce sync.Once
	var failed error
	rate := func(f func(string) error, dur time.Duration) float64 {
		var n atomic.Int64
		var wg sync.WaitGroup
		dl := time.Now().Add(dur)
		t0 := time.Now()
		for w := 0; w < clients; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(dl) {
					id := fmt.Sprintf("k-%036d", seq.Add(1))
					if err := f(id); err != nil {
						errOnce.Do(func() { failed = err })
						return
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(t0).Seconds()
	}
	for _, s := range shapes {
		rate(s.f, time.Second)
	}
	res := map[string][]float64{}
	for r := 0; r < 2; r++ {
		for i := range shapes {
			s := shapes[i]
			if r == 1 {
				s = shapes[len(shapes)-1-i]
			}
			res[s.name] = append(res[s.name], rate(s.f, dur))
		}
	}
	if failed != nil {
		return failed
	}
	b, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("engine %s, %d clients, %s per shape and round, 2 rounds (AB, BA); load average at end %s\n", kind, clients, dur, strings.Join(strings.Fields(string(b))[:3], " "))
	fmt.Println("| shape | per second, round 1 / round 2 | × raw conditional PutItem |")
	fmt.Println("| --- | --- | --- |")
	base := (res[shapes[0].name][0] + res[shapes[0].name][1]) / 2
	for _, s := range shapes {
		m := (res[s.name][0] + res[s.name][1]) / 2
		fmt.Printf("| %s | %.0f / %.0f | %.2f |\n", s.name, res[s.name][0], res[s.name][1], m/base)
	}
	return nil
}
