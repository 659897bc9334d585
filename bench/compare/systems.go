package main

import (
	"context"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
)

// requestBody returns the ~870-byte JSON body both systems receive.
func requestBody() string {
	var b strings.Builder
	b.WriteString(`{"workflow":"wf_01HZXKQ7V3","input":{"items":[`)
	for i := 0; b.Len() < 860; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%04d","qty":%d,"note":"gift wrap"}`, i, i%7+1)
	}
	b.WriteString(`]}}`)
	return b.String()
}

// newKit builds the Guard (the tenant from the authorizer's tenantId, logs
// discarded, wait as its Config.Wait: 0 the default, -1 no waiting) and
// the ledger that the measured systems run, on client's tables.
func newKit(client *dynamodb.Client, idemTable, effectsTable string, wait time.Duration) (*idem.Guard, *ledger.Ledger, error) {
	st, err := idemdynamo.New(idemdynamo.Config{Client: client, Table: idemTable})
	if err != nil {
		return nil, nil, err
	}
	g, err := idem.New(idem.Config{Store: st, Tenant: idem.AuthorizerKey("tenantId"), Wait: wait,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		return nil, nil, err
	}
	effects, err := ledgerdynamo.New(ledgerdynamo.Config{Client: client, Table: effectsTable})
	if err != nil {
		return nil, nil, err
	}
	l, err := ledger.New(ledger.Config{Store: effects})
	if err != nil {
		return nil, nil, err
	}
	return g, l, nil
}

// goSystem is idemkit's side: Layer 1 through the HTTP API (payload 2.0)
// adapter, the ledger's Do, and a plain PutItem floor, all on one client.
type goSystem struct {
	client     *dynamodb.Client
	floorTable string
	body       string
	h          idem.HTTPAPIHandler
	l          *ledger.Ledger
	keys       []string // keys of the last "first" block, replayed by "replay"
	effects    []ledger.Effect
}

func newGoSystem(client *dynamodb.Client, idemTable, effectsTable, floorTable, body string) (*goSystem, error) {
	g, l, err := newKit(client, idemTable, effectsTable, 0)
	if err != nil {
		return nil, err
	}
	s := &goSystem{client: client, floorTable: floorTable, body: body, l: l}
	s.h = g.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{
			StatusCode: 201,
			Headers:    map[string]string{"content-type": "application/json"},
			Body:       `{"runId":"run_` + ev.RequestContext.RequestID + `","status":"accepted"}`,
		}, nil
	})
	return s, nil
}

func (s *goSystem) event(key string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: "POST /runs",
		RawPath:  "/runs",
		Headers:  map[string]string{"content-type": "application/json", "idempotency-key": key},
		Body:     s.body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID:  "req-" + key,
			RouteKey:   "POST /runs",
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/runs"},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "tenant-a"}},
		},
	}
}

// lambdaCtx is what the Lambda runtime hands a handler: a lambdacontext and
// a deadline (so the lease is the remaining time and there is no heartbeat).
func lambdaCtx(id string) (context.Context, context.CancelFunc) {
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
	return context.WithDeadline(ctx, time.Now().Add(30*time.Second))
}

// Cases.
const (
	caseFloor     = "floor"
	caseFirst     = "first"
	caseReplay    = "replay"
	caseLedger    = "ledger-first"
	caseLedgerDup = "ledger-duplicate"
)

// one runs request i of case c; prefix makes keys unique per block.
func (s *goSystem) one(c string, i int, prefix string) error {
	switch c {
	case caseFloor:
		_, err := s.client.PutItem(context.Background(), &dynamodb.PutItemInput{
			TableName: aws.String(s.floorTable),
			Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: prefix + strconv.Itoa(i)},
				"v":  &types.AttributeValueMemberS{Value: "x"},
			},
		})
		return err
	case caseFirst, caseReplay:
		var key string
		if c == caseFirst {
			key = prefix + strconv.Itoa(i)
			s.keys = append(s.keys, key)
		} else {
			key = s.keys[i%len(s.keys)]
		}
		ctx, cancel := lambdaCtx(key)
		defer cancel()
		out, err := s.h(ctx, s.event(key))
		if err == nil && out.StatusCode != 201 {
			err = fmt.Errorf("status %d: %s", out.StatusCode, out.Body)
		}
		return err
	case caseLedger, caseLedgerDup:
		var eff ledger.Effect
		if c == caseLedger {
			run := "acme/run-" + prefix + fmt.Sprintf("-%08d", i)
			id, err := identity.FromActivity(identity.Activity{Tenant: "acme", RunID: run, NodeID: "charge", Ordinal: 1, Provider: "stripe"})
			if err != nil {
				return err
			}
			eff = ledger.Effect{Identity: id, RunID: run, NodeID: "charge"}
			s.effects = append(s.effects, eff)
		} else {
			eff = s.effects[i%len(s.effects)]
		}
		r, err := s.l.Do(context.Background(), eff, func(context.Context, ledger.Call) ([]byte, error) {
			return []byte(`{"id":"ch_3MmlLrLkdIwHu7ix0snN0B15","status":"succeeded"}`), nil
		})
		if err == nil && (c == caseLedgerDup) != r.Replayed {
			err = fmt.Errorf("%s: replayed=%t", c, r.Replayed)
		}
		return err
	}
	return fmt.Errorf("unknown case %q", c)
}

// run runs n sequential requests of case c and returns their latencies (µs).
func (s *goSystem) run(c string, n int, prefix string) ([]float64, error) {
	if c == caseFirst {
		s.keys = s.keys[:0]
	}
	if c == caseLedger {
		s.effects = s.effects[:0]
	}
	us := make([]float64, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if err := s.one(c, i, prefix); err != nil {
			return nil, fmt.Errorf("idemkit %s #%d: %w", c, i, err)
		}
		us[i] = float64(time.Since(t0).Nanoseconds()) / 1e3
	}
	return us, nil
}
