// Command refunds is an AWS Lambda SQS worker that uses ledger on one
// DynamoDB table: each refund a message asks for reaches the payment
// provider once in effect, however often SQS delivers the message and
// wherever an invocation crashes.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/identity"
)

func main() {
	l, err := newLedger(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	tenant, err := tenantFromEnv()
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return handle(ctx, l, tenant, ev), nil
	})
}

// tenantFromEnv is the tenant this worker refunds for: TENANT, required.
// It is the worker's configuration, never a message's: whoever may send to
// the queue could name any tenant in a body. Give each tenant its own queue
// (whose send grant is that tenant's producer) and worker. No default: a
// fixed one would make every worker deployed without TENANT one tenant,
// sharing one another's recorded refunds.
func tenantFromEnv() (string, error) {
	if t := os.Getenv("TENANT"); t != "" {
		return t, nil
	}
	return "", errors.New("TENANT is not set: name the tenant whose refund queue this worker reads")
}

// newLedger builds the ledger on the table named by EFFECTS_TABLE, with the
// claim lease EFFECT_LEASE_SECONDS (whole seconds, 1 to 3600 as the
// reference host accepts; default ledger.DefaultLease, 5 minutes; keep it
// below the function's Timeout).
func newLedger(ctx context.Context) (*ledger.Ledger, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if ep := os.Getenv("DYNAMODB_ENDPOINT"); ep != "" {
			o.BaseEndpoint = aws.String(ep) // idemkit dev's emulator, LocalStack, DynamoDB Local
			// DynamoDB Local sends a wrong CRC32 header with its error
			// responses: the SDK would log a checksum warning for each.
			o.DisableValidateResponseChecksum = true
		}
	})
	store, err := ledgerdynamo.New(ledgerdynamo.Config{Client: client, Table: os.Getenv("EFFECTS_TABLE")})
	if err != nil {
		return nil, err
	}
	lease := ledger.DefaultLease
	if v := os.Getenv("EFFECT_LEASE_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3600 {
			return nil, fmt.Errorf("EFFECT_LEASE_SECONDS=%q: want whole seconds, 1 to 3600", v)
		}
		lease = time.Duration(n) * time.Second
	}
	return ledger.New(ledger.Config{Store: store, Lease: lease})
}

// handle makes each message's refund; only the messages whose refund did
// not complete go back to SQS (ReportBatchItemFailures).
func handle(ctx context.Context, l *ledger.Ledger, tenant string, ev events.SQSEvent) events.SQSEventResponse {
	var resp events.SQSEventResponse
	for _, m := range ev.Records {
		if err := refundOnce(ctx, l, tenant, m); err != nil {
			log.Printf("message %s: %v", m.MessageId, err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	return resp
}

// refundOnce keys the refund on its business identity (the worker's tenant,
// operation, order): a redelivered message, or a second message for the
// same order, gets the recorded outcome and sends nothing. The amount is
// recorded as the request's digest: a message for that order asking another
// amount fails (*ledger.MismatchError), to the dead-letter queue, instead of
// being answered with the first refund's outcome. So does a message whose
// body names another tenant: sent to the wrong queue, or forged.
func refundOnce(ctx context.Context, l *ledger.Ledger, tenant string, m events.SQSMessage) (err error) {
	defer func() { // a panic fails this message alone, not the whole batch
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	var in struct {
		Tenant string `json:"tenant"`
		Order  string `json:"order"`
		Amount int    `json:"amount"`
	}
	if err := json.Unmarshal([]byte(m.Body), &in); err != nil {
		return fmt.Errorf("the body is not a refund request (JSON order, amount): %w", err)
	}
	if in.Tenant != "" && in.Tenant != tenant {
		return errors.New("the body names another tenant than this worker's TENANT")
	}
	id, err := identity.FromBusiness(identity.Business{Tenant: tenant, Operation: "refund", Key: in.Order})
	if err != nil {
		return err
	}
	digest := fmt.Sprintf("%x", sha256.Sum256([]byte(strconv.Itoa(in.Amount))))
	eff := ledger.Effect{Identity: id, RequestDigest: digest, SemanticRecipe: "refund-amount-v1"}
	r, err := l.Do(ctx, eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
		// here: POST /refunds to the provider with "Idempotency-Key: " + c.ProviderKey;
		// return ledger.NotSent(err) if it surely did not arrive, ledger.Uncertain(err) if it may have
		refunds.Add(1)
		return []byte(fmt.Sprintf(`{"refund":"re_%s","amount":%d}`, in.Order, in.Amount)), nil
	})
	if err != nil {
		return err
	}
	// Log the message id, never the order (the refund's key) or a body.
	log.Printf("message %s: refunded (replayed %v)", m.MessageId, r.Replayed)
	return nil
}

// refunds counts the provider calls (for the local try-out).
var refunds atomic.Int64
