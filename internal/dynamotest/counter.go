package dynamotest

import (
	"context"
	"maps"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// Counter counts DynamoDB API traffic of the clients it is installed on
// (dynamodb.New / Emulator.Client option c.Middleware()).
//
// Two numbers are kept per operation:
//   - round trips (Total, Ops): HTTP requests actually handed to the
//     transport, counted at the end of the Deserialize step, i.e. once per
//     attempt: an SDK retry is a second round trip. A request failed by
//     Faults.FailNext before sending is not a round trip; one failed by
//     Faults.FailNextAfterSend is (it was sent).
//   - calls (Calls, CallOps): API operation invocations (client method
//     calls), counted at the Initialize step, once however many attempts.
//
// Round trips are the contract measured by tests ("a replay takes one round
// trip"). Counter is safe for concurrent use.
type Counter struct {
	mu    sync.Mutex
	trips map[string]int
	calls map[string]int
}

// NewCounter returns a zeroed Counter.
func NewCounter() *Counter {
	return &Counter{trips: map[string]int{}, calls: map[string]int{}}
}

// Middleware returns the client option that installs the counter.
func (c *Counter) Middleware() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			if err := s.Initialize.Add(middleware.InitializeMiddlewareFunc("dynamotest.CountCalls",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					c.add(c.calls, middleware.GetOperationName(ctx))
					return next.HandleInitialize(ctx, in)
				}), middleware.Before); err != nil {
				return err
			}
			return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("dynamotest.CountRoundTrips",
				func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
					c.add(c.trips, middleware.GetOperationName(ctx))
					return next.HandleDeserialize(ctx, in)
				}), middleware.After)
		})
	}
}

func (c *Counter) add(m map[string]int, op string) {
	c.mu.Lock()
	m[op]++
	c.mu.Unlock()
}

// Total returns the number of round trips (HTTP requests sent) since the
// last Reset.
func (c *Counter) Total() int { return c.sum(c.trips) }

// Ops returns round trips per operation name ("PutItem", "GetItem", ...).
func (c *Counter) Ops() map[string]int { return c.clone(c.trips) }

// Calls returns the number of API operation calls since the last Reset.
func (c *Counter) Calls() int { return c.sum(c.calls) }

// CallOps returns API operation calls per operation name.
func (c *Counter) CallOps() map[string]int { return c.clone(c.calls) }

func (c *Counter) sum(m map[string]int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func (c *Counter) clone(m map[string]int) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(m)
}

// Reset zeroes all counts.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.trips)
	clear(c.calls)
}
