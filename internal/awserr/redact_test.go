package awserr

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/internal/keyhash"
)

// refuse fails every call before it is sent with err(the call's input).
func refuse(err func(in any) error) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("test.refuse",
				func(ctx context.Context, in middleware.InitializeInput, _ middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					return middleware.InitializeOutput{}, middleware.Metadata{}, err(in.Parameters)
				}), middleware.After)
		})
	}
}

// TestRedactValuesKeepsTheTypedError: a conditional-check failure whose
// message quotes the item it refused (its key, a body inside it, a binary
// value) is logged without them, and errors.As still finds the typed error
// with the item it carries; installed twice, the option runs once.
func TestRedactValuesKeepsTheTypedError(t *testing.T) {
	const pk, body, short = "caller:v1:SECRET-record-id", `{"x":"SECRET-body"}`, "abc"
	blob := []byte("SECRET-binary-value")
	item := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: pk}, "tenant": &types.AttributeValueMemberS{Value: short},
		"inputs": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"b": &types.AttributeValueMemberS{Value: body}}},
		"blob":   &types.AttributeValueMemberB{Value: blob},
	}
	c := dynamodb.New(dynamodb.Options{Region: "eu-west-1", Credentials: aws.AnonymousCredentials{}},
		refuse(func(in any) error {
			p := in.(*dynamodb.PutItemInput)
			return &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed: " +
				p.Item["pk"].(*types.AttributeValueMemberS).Value + " " + body + " tenant " + short + " " + "U0VDUkVULWJpbmFyeS12YWx1ZQ=="),
				Item: p.Item}
		}), RedactValues, RedactValues)
	_, err := c.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("t"), Item: item})
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("the error quotes a value the call sent: %v", err)
	}
	for _, want := range []string{keyhash.Log(pk), keyhash.Log(body), "tenant " + short, "The conditional request failed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not contain %q", err, want)
		}
	}
	if n := strings.Count(err.Error(), "kh:"); n != 3 {
		t.Errorf("%d hashes in %q, want 3 (the option ran once)", n, err)
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) || ccf.Item["pk"].(*types.AttributeValueMemberS).Value != pk {
		t.Fatalf("errors.As lost the typed error or its item: %v", err)
	}
	// The service's own message, read from the typed error (as the CLI
	// words a refusal), is redacted alike (RED_TEAM 541).
	if msg := RedactedMessage(err, ccf.ErrorMessage()); strings.Contains(msg, "SECRET") || !strings.Contains(msg, keyhash.Log(pk)) ||
		!strings.HasPrefix(msg, "The conditional request failed") {
		t.Fatalf("RedactedMessage = %q; want the message with the values hashed", msg)
	}
	if msg := RedactedMessage(errors.New("x"), "plain "+pk); msg != "plain "+pk {
		t.Fatalf("RedactedMessage of an error not redacted = %q; want the message as it is", msg)
	}
}

// TestRedactValuesLeavesOtherErrorsAlone: an error quoting nothing the
// call sent is the SDK's own, unwrapped.
func TestRedactValuesLeavesOtherErrorsAlone(t *testing.T) {
	want := &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
	c := dynamodb.New(dynamodb.Options{Region: "eu-west-1", Credentials: aws.AnonymousCredentials{}},
		refuse(func(any) error { return want }), RedactValues)
	_, err := c.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "caller:v1:abc"}}})
	var rnf *types.ResourceNotFoundException
	if !errors.As(err, &rnf) || rnf != want || errors.As(err, new(*redactedError)) {
		t.Fatalf("err = %#v, want the SDK's own error", err)
	}
}

// TestSentValuesLeavesOutWhatTheTextCannotHold: a value longer than the
// error's text cannot be in it, and is neither listed nor (a binary one)
// encoded: a refused write carrying a large response costs no encoding
// of it.
func TestSentValuesLeavesOutWhatTheTextCannotHold(t *testing.T) {
	in := &dynamodb.PutItemInput{Item: map[string]types.AttributeValue{
		"pk":   &types.AttributeValueMemberS{Value: "rec-0001"},
		"body": &types.AttributeValueMemberB{Value: make([]byte, 1<<20)},
		"text": &types.AttributeValueMemberS{Value: strings.Repeat("x", 200)},
	}}
	if got := sentValues(in, 100); len(got) != 1 || got[0] != "rec-0001" {
		t.Fatalf("sentValues = %d values; want only the record id", len(got))
	}
}
