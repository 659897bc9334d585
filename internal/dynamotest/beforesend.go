package dynamotest

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// BeforeSend returns a client option that calls fn with each call's input
// (a *dynamodb.PutItemInput, a *dynamodb.TransactWriteItemsInput, ...)
// before the call is sent, once per call (not per SDK retry): a barrier
// a test puts between two writes of one operation, to act there (a
// racing request) without a sleep. fn runs on the calling goroutine; its
// own calls through another client are not seen.
func BeforeSend(fn func(in any)) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("dynamotest.BeforeSend",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					fn(in.Parameters)
					return next.HandleInitialize(ctx, in)
				}), middleware.Before)
		})
	}
}
