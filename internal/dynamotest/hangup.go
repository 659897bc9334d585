package dynamotest

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// HangUp makes the client of a request hang up in the middle of one
// DynamoDB call of the clients it is installed in (Middleware): armed with
// the request context's cancel function, the next call of the operation
// cancels it either before the call is sent (it never lands; the SDK
// fails it with the context's error) or after it landed (its answer lost
// to the cancellation, a smithy.CanceledError). Safe for concurrent use.
type HangUp struct {
	mu     sync.Mutex
	op     string
	cancel context.CancelFunc
	landed bool
}

// Arm makes the next call of op (e.g. "PutItem", or AnyOp) call cancel:
// after the call landed when landed, else before it is sent.
func (h *HangUp) Arm(op string, cancel context.CancelFunc, landed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.op, h.cancel, h.landed = op, cancel, landed
}

func (h *HangUp) take(op string) (context.CancelFunc, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cancel == nil || h.op != op && h.op != AnyOp {
		return nil, false
	}
	c := h.cancel
	h.cancel = nil
	return c, h.landed
}

// Middleware returns the client option that installs it.
func (h *HangUp) Middleware() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("dynamotest.HangUp",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					cancel, landed := h.take(middleware.GetOperationName(ctx))
					switch {
					case cancel == nil:
						return next.HandleFinalize(ctx, in)
					case !landed:
						cancel()
						return next.HandleFinalize(ctx, in)
					}
					out, md, err := next.HandleFinalize(ctx, in)
					if err != nil {
						return out, md, err
					}
					cancel()
					return middleware.FinalizeOutput{}, md, &smithy.CanceledError{Err: context.Canceled}
				}), middleware.After)
		})
	}
}

// AwaitHangUp makes the next call of op (e.g. "PutItem", or AnyOp) of the
// clients it is installed in (Middleware) wait, before it is sent, until
// its context ends: the request's client hanging up (or its deadline)
// is what lets it go on, to fail with the context's error. Safe for
// concurrent use.
type AwaitHangUp struct {
	mu sync.Mutex
	op string
}

// Arm makes the next call of op wait for its context to end; "" disarms.
func (a *AwaitHangUp) Arm(op string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.op = op
}

func (a *AwaitHangUp) take(op string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.op == "" || a.op != op && a.op != AnyOp {
		return false
	}
	a.op = ""
	return true
}

// Middleware returns the client option that installs it.
func (a *AwaitHangUp) Middleware() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("dynamotest.AwaitHangUp",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					if a.take(middleware.GetOperationName(ctx)) {
						<-ctx.Done()
					}
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	}
}
