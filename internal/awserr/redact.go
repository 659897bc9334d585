package awserr

import (
	"context"
	"encoding/base64"
	"errors"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/internal/keyhash"
)

// redactID names the middleware RedactValues installs.
const redactID = "idemkit.RedactValues"

// minRedacted is the length from which a value a request sent is redacted
// from the error of that request: shorter values (a state name, a flag)
// carry no key and keep the message readable.
const minRedacted = 4

// RedactValues is a DynamoDB client option: the error of a call has, in its
// text, every string value the call sent (and the base64 form of every
// binary one) of at least four bytes replaced by its keyed, truncated hash
// (keyhash.Log). A service's message may quote what it refused (a
// ValidationException the value it could not take, a conditional-check
// failure the item), and those values are record ids, run inputs, request
// bodies: the error is logged, and its text never carries them. The error
// itself is kept (Unwrap), so errors.As still finds the service's typed
// error and what it carries (ConditionalCheckFailedException.Item,
// TransactionCanceledException.CancellationReasons). A call that succeeds
// costs nothing more; installed twice, it runs once.
func RedactValues(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		if _, ok := s.Initialize.Get(redactID); ok {
			return nil
		}
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc(redactID,
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if err != nil {
					text := err.Error()
					err = redact(err, text, sentValues(in.Parameters, len(text)))
				}
				return out, md, err
			}), middleware.Before)
	})
}

// redactedError is an SDK error whose text has the request's values
// replaced by their hashes.
type redactedError struct {
	err  error
	text string
	// values are the values replaced in text, longest first.
	values []string
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }

// redact returns err, its text (err.Error()) without any of values
// (longest first, so a value inside a longer one never leaves part of the
// longer behind).
func redact(err error, text string, values []string) error {
	sort.Slice(values, func(i, j int) bool { return len(values[i]) > len(values[j]) })
	var replaced []string
	for _, v := range values {
		if len(v) >= minRedacted && strings.Contains(text, v) {
			text, replaced = strings.ReplaceAll(text, v, keyhash.Log(v)), append(replaced, v)
		}
	}
	if replaced == nil {
		return err
	}
	return &redactedError{err: err, text: text, values: replaced}
}

// RedactedMessage is msg, a part of err's text read from an error err
// wraps (the service's own message, smithy.APIError's ErrorMessage), with
// the values RedactValues replaced in err's text replaced alike: a message
// read under the redaction quotes no more than the error's text does
// (RED_TEAM 541).
func RedactedMessage(err error, msg string) string {
	var re *redactedError
	if !errors.As(err, &re) {
		return msg
	}
	for _, v := range re.values {
		msg = strings.ReplaceAll(msg, v, keyhash.Log(v))
	}
	return msg
}

// sentValues returns the string values (and the base64 of the binary ones)
// of every item, key and expression value of a DynamoDB request, those of
// at most limit bytes (the length of the error's text, which a longer one
// cannot be in): a refused write of a large item (a completion whose
// lease was lost, carrying its response) encodes none of its large values.
func sentValues(p any, limit int) []string {
	var out []string
	str := func(s string) {
		if len(s) <= limit {
			out = append(out, s)
		}
	}
	bin := func(b []byte) {
		if base64.StdEncoding.EncodedLen(len(b)) <= limit {
			out = append(out, base64.StdEncoding.EncodeToString(b))
		}
	}
	var walk func(types.AttributeValue)
	walk = func(v types.AttributeValue) {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			str(v.Value)
		case *types.AttributeValueMemberB:
			bin(v.Value)
		case *types.AttributeValueMemberSS:
			for _, x := range v.Value {
				str(x)
			}
		case *types.AttributeValueMemberBS:
			for _, b := range v.Value {
				bin(b)
			}
		case *types.AttributeValueMemberM:
			for _, x := range v.Value {
				walk(x)
			}
		case *types.AttributeValueMemberL:
			for _, x := range v.Value {
				walk(x)
			}
		}
	}
	item := func(ms ...map[string]types.AttributeValue) {
		for _, m := range ms {
			for _, v := range m {
				walk(v)
			}
		}
	}
	switch p := p.(type) {
	case *dynamodb.PutItemInput:
		item(p.Item, p.ExpressionAttributeValues)
	case *dynamodb.UpdateItemInput:
		item(p.Key, p.ExpressionAttributeValues)
	case *dynamodb.DeleteItemInput:
		item(p.Key, p.ExpressionAttributeValues)
	case *dynamodb.GetItemInput:
		item(p.Key)
	case *dynamodb.QueryInput:
		item(p.ExpressionAttributeValues, p.ExclusiveStartKey)
	case *dynamodb.ScanInput:
		item(p.ExpressionAttributeValues, p.ExclusiveStartKey)
	case *dynamodb.BatchGetItemInput:
		for _, ka := range p.RequestItems {
			item(ka.Keys...)
		}
	case *dynamodb.BatchWriteItemInput:
		for _, ws := range p.RequestItems {
			for _, w := range ws {
				if w.PutRequest != nil {
					item(w.PutRequest.Item)
				}
				if w.DeleteRequest != nil {
					item(w.DeleteRequest.Key)
				}
			}
		}
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range p.TransactItems {
			if it.Put != nil {
				item(it.Put.Item, it.Put.ExpressionAttributeValues)
			}
			if it.Update != nil {
				item(it.Update.Key, it.Update.ExpressionAttributeValues)
			}
			if it.Delete != nil {
				item(it.Delete.Key, it.Delete.ExpressionAttributeValues)
			}
			if it.ConditionCheck != nil {
				item(it.ConditionCheck.Key, it.ConditionCheck.ExpressionAttributeValues)
			}
		}
	case *dynamodb.TransactGetItemsInput:
		for _, it := range p.TransactItems {
			if it.Get != nil {
				item(it.Get.Key)
			}
		}
	}
	return out
}
