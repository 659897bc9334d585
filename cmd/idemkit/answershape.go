package main

import (
	"context"
	"errors"
	"strings"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// missingMember names what DynamoDB's answer to the call always carries and
// out lacks ("" when nothing is missing, or the call's answer may be empty):
// a Scan's or Query's Items (an empty list when nothing matched), a
// CreateTable's TableDescription, the old item of a DeleteItem that returns
// it and whose condition required the item (apikey revoke). An endpoint
// answering JSON that is no DynamoDB answer (`{}`, an API's health
// document) would otherwise read as an empty table or a revoked key. A
// GetItem's and a PutItem's answers may be `{}`: those cannot be told.
func missingMember(in, out any) string {
	switch o := out.(type) {
	case *dynamodb.ScanOutput:
		if o.Items == nil {
			return "Items"
		}
	case *dynamodb.QueryOutput:
		if o.Items == nil {
			return "Items"
		}
	case *dynamodb.CreateTableOutput:
		if o.TableDescription == nil {
			return "TableDescription"
		}
	case *dynamodb.DeleteItemOutput:
		i, _ := in.(*dynamodb.DeleteItemInput)
		if i != nil && i.ReturnValues == types.ReturnValueAllOld && i.ConditionExpression != nil &&
			strings.Contains(*i.ConditionExpression, "attribute_exists") && o.Attributes == nil {
			return "Attributes"
		}
	}
	return ""
}

// notDynamoAnswer is the error of a call whose answer lacks what
// DynamoDB's always carries (missingMember): a deserialization error with
// the answer's HTTP status, which storeError says as an answer that is no
// DynamoDB answer.
type notDynamoAnswer struct {
	status int
	err    *smithy.DeserializationError
}

func (e *notDynamoAnswer) Error() string       { return e.err.Error() }
func (e *notDynamoAnswer) Unwrap() error       { return e.err }
func (e *notDynamoAnswer) HTTPStatusCode() int { return e.status }

// checkAnswerShape is the client option that refuses such answers
// (missingMember), after the SDK decoded them.
func checkAnswerShape(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("idemkitAnswerShape",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if err != nil {
					return out, md, err
				}
				if m := missingMember(in.Parameters, out.Result); m != "" {
					status := 0
					if r, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok {
						status = r.StatusCode
					}
					return out, md, &notDynamoAnswer{status: status, err: &smithy.DeserializationError{Err: errors.New("the answer has no " + m)}}
				}
				return out, md, nil
			}), middleware.After)
	})
}
