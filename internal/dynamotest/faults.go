package dynamotest

import (
	"context"
	"reflect"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// AnyOp matches every operation in Faults.FailNext / FailNextAfterSend.
const AnyOp = "*"

// Faults injects errors into the DynamoDB calls of the clients it is
// installed on (option f.Middleware()). Injection happens per attempt, after
// the SDK's retry middleware: an injected error the SDK classifies as
// retryable (Throttle(), ResponseLost()) is retried by the SDK like a real
// one, and each retry consumes one injection. Rules are consumed in the order
// they were added. Faults is safe for concurrent use.
type Faults struct {
	mu    sync.Mutex
	rules []*rule
	fired int
}

type rule struct {
	op        string
	n         int
	err       error
	afterSend bool
	pass      bool           // PassNext: the attempt goes through untouched
	match     func(any) bool // FailNextIf: the calls whose input it takes; nil: every call
}

// NewFaults returns a Faults with nothing scheduled.
func NewFaults() *Faults { return &Faults{} }

// FailNext makes the next n attempts of operation op (e.g. "PutItem", or
// AnyOp) fail with err WITHOUT sending the request: the server never sees it.
func (f *Faults) FailNext(op string, n int, err error) { f.add(op, n, err, false) }

// FailNextAfterSend makes the next n attempts of op send the request, let
// the server apply it, then discard the response and fail with err: "the
// write was applied but the response was lost".
func (f *Faults) FailNextAfterSend(op string, n int, err error) { f.add(op, n, err, true) }

// FailNextIf is FailNext for the calls of op whose input (a
// *dynamodb.PutItemInput, ...) match reports true: the others pass this
// rule by, to the rules after it. It picks out one kind of write among
// those of an operation (a response's chunk items among PutItems, say)
// where counting calls cannot, as when they run in parallel.
func (f *Faults) FailNextIf(op string, n int, err error, match func(in any) bool) {
	if n <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &rule{op: op, n: n, err: err, match: match})
}

// PassNext lets the next n attempts of op through untouched, so that the
// rules added after it reach a later call of the same operation (e.g. the
// completion PutItem after the claim PutItem). Passed attempts are not
// counted by Fired.
func (f *Faults) PassNext(op string, n int) {
	if n <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &rule{op: op, n: n, pass: true})
}

func (f *Faults) add(op string, n int, err error, after bool) {
	if n <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &rule{op: op, n: n, err: err, afterSend: after})
}

// Pending returns how many injections are still scheduled.
func (f *Faults) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.rules {
		n += r.n
	}
	return n
}

// Fired returns how many injections have happened.
func (f *Faults) Fired() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired
}

// Clear drops every scheduled injection.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// take consumes the first rule matching op and the call's input in.
func (f *Faults) take(op string, in any) (afterSend, ok bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.rules {
		if r.op != op && r.op != AnyOp || r.match != nil && !r.match(in) {
			continue
		}
		r.n--
		if r.n == 0 {
			f.rules = append(f.rules[:i], f.rules[i+1:]...)
		}
		if r.pass {
			return false, false, nil
		}
		f.fired++
		return r.afterSend, true, r.err
	}
	return false, false, nil
}

// Middleware returns the client option that installs the injector.
func (f *Faults) Middleware() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			if err := s.Initialize.Add(middleware.InitializeMiddlewareFunc("dynamotest.FaultsInput",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					return next.HandleInitialize(middleware.WithStackValue(ctx, faultsInput{}, in.Parameters), in)
				}), middleware.Before); err != nil {
				return err
			}
			return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("dynamotest.Faults",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					after, ok, err := f.take(middleware.GetOperationName(ctx), middleware.GetStackValue(ctx, faultsInput{}))
					if !ok {
						return next.HandleFinalize(ctx, in)
					}
					if !after {
						return middleware.FinalizeOutput{}, middleware.Metadata{}, err
					}
					out, md, _ := next.HandleFinalize(ctx, in)
					forget(out.Result)
					return middleware.FinalizeOutput{}, md, err
				}), middleware.After)
		})
	}
}

// faultsInput keys a call's input among its stack values, for FailNextIf.
type faultsInput struct{}

// Throttle returns a ProvisionedThroughputExceededException-coded API error,
// which the SDK's standard retryer retries as a throttle.
func Throttle() error {
	return &smithy.GenericAPIError{
		Code:    "ProvisionedThroughputExceededException",
		Message: "injected by dynamotest",
		Fault:   smithy.FaultServer,
	}
}

// InternalServerError returns an InternalServerError-coded API error.
// The SDK's standard retryer does not classify it as retryable by code alone
// (a real one is retried because of its HTTP 500 status).
func InternalServerError() error {
	return &smithy.GenericAPIError{
		Code:    "InternalServerError",
		Message: "injected by dynamotest",
		Fault:   smithy.FaultServer,
	}
}

// ResponseLost returns a connection error (read: connection reset), which
// the SDK retries. Use it with FailNextAfterSend to simulate a write that was
// applied but whose response never arrived.
func ResponseLost() error { return responseLost{} }

type responseLost struct{}

func (responseLost) Error() string {
	return "read tcp: connection reset by peer (injected by dynamotest)"
}
func (responseLost) ConnectionError() bool { return true }

// Loss is one way a write's answer is lost: the engine applies the write
// and its answer never arrives, so the SDK retries it. Landed is true when
// the SDK's last try got an answer (the store must then recognise its own
// earlier write); false when the SDK gave up (the store cannot know, and
// returns an error).
type Loss struct {
	Name   string
	Arm    func(f *Faults)
	Landed bool
}

// Losses are the answer losses a store's write must survive, armed on the
// next call of op: lost once, lost twice, and lost then throttled until
// the SDK gives up.
func Losses(op string) []Loss {
	return []Loss{
		{"lost once", func(f *Faults) { f.FailNextAfterSend(op, 1, ResponseLost()) }, true},
		{"lost twice", func(f *Faults) { f.FailNextAfterSend(op, 2, ResponseLost()) }, true},
		{"lost then throttled", func(f *Faults) {
			f.FailNextAfterSend(op, 1, ResponseLost())
			f.FailNext(op, 2, Throttle())
		}, false},
	}
}

// forget zeroes the output an answer was decoded into. The SDK decodes
// every attempt of one call into the same output value, so an answer
// lost after it was decoded would otherwise leave its fields in the
// retry's result wherever the retry's answer sets none (a DeleteItem's
// old item, RED_TEAM 355); a really lost answer is never decoded.
func forget(result any) {
	v := reflect.ValueOf(result)
	if v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().CanSet() {
		v.Elem().Set(reflect.Zero(v.Elem().Type()))
	}
}
