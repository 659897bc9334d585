package main

import (
	"context"
	"errors"
	"net/http"
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

// dynamoContentTypes are the Content-Types of DynamoDB's answers (its JSON
// protocol's two versions), compared without case and parameters.
var dynamoContentTypes = []string{"application/x-amz-json-1.0", "application/x-amz-json-1.1"}

// dynamoDBAnswer reports whether an answer's headers h are those of an
// engine speaking DynamoDB's wire protocol: an x-amzn-RequestId header, or
// a Content-Type of application/x-amz-json-1.0 or -1.1 (any case,
// parameters allowed). DynamoDB, DynamoDB Local, moto and dynalite send
// both on every answer, errors too; an API, a web server or a proxy's own
// page sends neither.
func dynamoDBAnswer(h http.Header) bool {
	if strings.TrimSpace(h.Get("X-Amzn-Requestid")) != "" {
		return true
	}
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	ct = strings.TrimSpace(ct)
	for _, d := range dynamoContentTypes {
		if strings.EqualFold(ct, d) {
			return true
		}
	}
	return false
}

// notDynamoEngine is the cause of a call refused because its answer came
// without DynamoDB's headers (dynamoDBAnswer): the endpoint that answered
// (scheme, host and path, never user info) and the Content-Type it sent.
type notDynamoEngine struct {
	endpoint    string
	contentType string
}

func (e *notDynamoEngine) Error() string {
	return e.endpoint + " answered without DynamoDB's headers (Content-Type " + e.contentType + ")"
}

// checkDynamoHeaders is the client option that refuses an answer without
// DynamoDB's headers (dynamoDBAnswer) before the SDK decodes it: a body of
// `{}` is a PutItem's answer, and a GetItem's finding nothing, so an API
// or a web server answering `200 {}` would otherwise read as a key or a
// secret stored (RED_TEAM 372). It is a deserialize-step middleware next to
// the transport, so it sees each try's raw answer: a try that got no
// answer (a connection lost) passes through as it came, for the SDK's
// retry and awserr.Unanswered to judge, and the refusal is a
// deserialization error carrying the answer's status (the SDK's response
// error wraps it), so a gateway's 502 to 504 is retried and counted as
// unanswered as before. No round trip is added.
func checkDynamoHeaders(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("idemkitDynamoHeaders",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleDeserialize(ctx, in)
				if err != nil {
					return out, md, err
				}
				r, ok := out.RawResponse.(*smithyhttp.Response)
				if !ok || r.Response == nil || dynamoDBAnswer(r.Header) {
					return out, md, err
				}
				ne := &notDynamoEngine{contentType: "none"}
				if ct := r.Header.Get("Content-Type"); ct != "" {
					ne.contentType = printable(ct, 80)
				}
				if req, ok := in.Request.(*smithyhttp.Request); ok && req.URL != nil {
					ne.endpoint = req.URL.Scheme + "://" + req.URL.Host + strings.TrimSuffix(req.URL.EscapedPath(), "/")
				}
				return out, md, &smithy.DeserializationError{Err: ne}
			}), middleware.After)
	})
}

// printable is s without control characters, at most n bytes (a remote
// server's header, said on a terminal).
func printable(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}
