package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/internal/awserr"
	"github.com/idemkit/idemkit/internal/emulator"
)

// endpointHint is what storeError suggests when the engine cannot be
// reached, in the flags of the commands that take --endpoint and --region.
const endpointHint = "is it running, and are --endpoint and --region right?"

// noCredentials and noRegion say what a command that reaches AWS (no
// --endpoint) lacks when the SDK's default configuration has no
// credentials, or none it could refresh (an expired SSO session), or no
// region.
const (
	noCredentials = "no AWS credentials could be found or refreshed (the environment, the shared config and credentials files, " +
		"an SSO profile, an instance or container role): sign in (aws sso login; AWS_PROFILE names the profile) " +
		"or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; for an emulator, give --endpoint"
	noRegion = "no AWS region: give --region, or set AWS_REGION (or a region in the AWS profile)"
)

// errorLabels are the prefixes the kit's packages put on their errors
// ("tables: ", "host: "): names of Go packages, not of anything a user
// did, so a message for a user leaves them out.
var errorLabels = []string{"tables: ", "host: ", "devstack: ", "dynamostore: ", "fence/dynamostore: "}

// storeError renders the error of a command's DynamoDB call for its user:
// what the command was doing (the text wrapped around the SDK's error),
// the DynamoDB operation, and the cause in a few words, without the SDK's
// retry counts and request ids. An engine that cannot be reached is said
// so, with a hint (endpointHint); a refusal keeps DynamoDB's error code and
// message. Any other error is its own text.
func storeError(err error) string { return storeErrorHint(err, endpointHint) }

// storeErrorHint is storeError with the hint a command gives when its
// engine cannot be reached, for a command whose flags differ.
func storeErrorHint(err error, hint string) string {
	var oe *smithy.OperationError
	if !errors.As(err, &oe) || !strings.HasSuffix(err.Error(), oe.Error()) {
		return unlabelled(err.Error()) // not an SDK error, or one joined with others
	}
	doing := unlabelled(strings.TrimSuffix(strings.TrimSpace(strings.TrimSuffix(err.Error(), oe.Error())), ":"))
	if w, _, _ := strings.Cut(doing, " "); w == oe.OperationName {
		doing = "" // the store's own name for the call ("Query byRun"): the operation, said below
	}
	if doing != "" {
		doing += ": "
	}
	what := "DynamoDB " + oe.OperationName + " failed: "
	// The SDK's configuration, not DynamoDB, refused the call: its chain
	// of wrapped causes names SDK internals (the instance-metadata client
	// it tried last, the endpoint rules), so the message says what is
	// missing and how to give it.
	var ae smithy.APIError
	switch cause := oe.Err.Error(); {
	case strings.HasPrefix(cause, "get identity: ") && errors.As(oe.Err, &ae):
		// The chain found a source that refused (an assumed role's
		// AccessDenied, an expired session): its refusal, not "none".
		return doing + what + "the AWS credentials were refused: " + ae.ErrorCode() + ": " + ae.ErrorMessage() +
			" (check the profile or role; after an expired session, sign in again: aws sso login)"
	case strings.HasPrefix(cause, "get identity: "):
		return doing + what + noCredentials
	case strings.Contains(cause, "Missing Region"):
		return doing + what + noRegion
	}
	var status interface{ HTTPStatusCode() int }
	// The endpoint answered without DynamoDB's headers (checkDynamoHeaders):
	// which endpoint, what DynamoDB's answers carry, and what to check.
	var nde *notDynamoEngine
	if errors.As(err, &nde) && errors.As(err, &status) {
		code := status.HTTPStatusCode()
		return doing + what + "the endpoint answered " + strings.TrimSpace(strconv.Itoa(code)+" "+http.StatusText(code)) +
			", which is no DynamoDB answer: " + nde.endpoint + " sent neither an x-amzn-RequestId header nor a Content-Type of " +
			"application/x-amz-json-1.0 (or -1.1), as DynamoDB and the engines speaking its protocol do (its Content-Type: " + nde.contentType +
			"); is that the engine's address, not an API's or a web server's, and are --endpoint and --region right?"
	}
	// The endpoint answered HTTP, but not as DynamoDB does: a body that is
	// no DynamoDB JSON (an HTML page), or an error naming no DynamoDB
	// error type (the SDK's "UnknownError"; DynamoDB names one on every
	// error). The status says what answered.
	var de *smithy.DeserializationError
	if errors.As(err, &status) && (errors.As(err, &de) || errors.As(err, &ae) && ae.ErrorCode() == "UnknownError") {
		code := status.HTTPStatusCode()
		return doing + what + "the endpoint answered " + strings.TrimSpace(strconv.Itoa(code)+" "+http.StatusText(code)) +
			", which is no DynamoDB answer (the address of an API or a web server, not of the engine?); " + hint
	}
	// Ctrl-C (or SIGTERM) while the call waited for its answer: said as
	// such; a write's outcome is then unknown.
	if errors.Is(err, context.Canceled) {
		msg := doing + what + "interrupted before it was answered"
		if writeOperation(oe.OperationName) {
			msg += ": the write may have been applied; look before running the command again"
		}
		return msg
	}
	// An engine that accepted the connection and began no answer within
	// engineAnswerTimeout on any try.
	if strings.Contains(err.Error(), "timeout awaiting response headers") {
		return doing + what + "no answer within " + engineAnswerTimeout.String() + " on any try (the engine hung, or the address is another service's); " + hint
	}
	// AWS's own DynamoDB host does not resolve: a region that does not
	// exist (a typo) or a machine offline; no engine of the user's to ask
	// about.
	var dns *net.DNSError
	if errors.As(err, &dns) && (strings.HasSuffix(dns.Name, ".amazonaws.com") || strings.HasSuffix(dns.Name, ".amazonaws.com.cn")) {
		return doing + what + "cannot reach DynamoDB at " + dns.Name + " (" + dns.Err + "): is the region right (--region, AWS_REGION), and is this machine online?"
	}
	var ne net.Error
	var oerr *net.OpError
	switch {
	case errors.As(err, &ae):
		return doing + what + ae.ErrorCode() + ": " + awserr.RedactedMessage(err, ae.ErrorMessage())
	case errors.As(err, &oerr):
		return doing + what + "cannot reach the engine (" + oerr.Error() + "); " + hint
	case errors.As(err, &ne):
		return doing + what + ne.Error()
	}
	return doing + what + oe.Err.Error()
}

// unlabelled is msg without the kit's package labels at its start
// (errorLabels).
func unlabelled(msg string) string {
	for trimmed := true; trimmed; {
		trimmed = false
		for _, l := range errorLabels {
			if strings.HasPrefix(msg, l) {
				msg, trimmed = strings.TrimPrefix(msg, l), true
			}
		}
	}
	return msg
}

// awsClient is the DynamoDB client of a command that reaches AWS (no
// --endpoint), from the default AWS configuration; an error loading it is
// said for a user (awsConfigError).
func awsClient(ctx context.Context) (*dynamodb.Client, error) {
	// The SDK's own log lines ("SDK 2026/12/07 ... WARN falling back to
	// IMDSv1: ...", where the instance metadata refuses a token) go to the
	// process's stderr beside the command's one line: its failures are said
	// in the command's words (RED_TEAM 415).
	c, err := kit.NewDynamoClient(ctx, "", config.WithLogger(logging.Nop{}))
	if err != nil {
		return nil, awsConfigError(err)
	}
	return dynamodb.New(c.Options(), awserr.MarkUnanswered), nil
}

// awsConfigError says why the default AWS configuration could not be
// loaded: a profile the shared files lack (AWS_PROFILE misspelt, a
// machine not set up) with what to do, or else the SDK's reason without
// the kit's labels.
func awsConfigError(err error) error {
	var pe config.SharedConfigProfileNotExistError
	if errors.As(err, &pe) {
		return fmt.Errorf("AWS profile %q (AWS_PROFILE) is in neither the shared config nor the credentials file: "+
			"check its name (aws configure list-profiles) or set it up (aws configure sso)", pe.Profile)
	}
	return errors.New("the AWS configuration could not be read: " + strings.TrimPrefix(unlabelled(err.Error()), "AWS config: "))
}

// writeOperation reports whether the DynamoDB operation op writes.
func writeOperation(op string) bool {
	for _, p := range []string{"Put", "Update", "Delete", "TransactWrite", "BatchWrite", "Create"} {
		if strings.HasPrefix(op, p) {
			return true
		}
	}
	return false
}

// engineAnswerTimeout bounds how long a command waits for an engine given
// by --endpoint to begin its answer, per try (the SDK's retryer makes up
// to three): an engine that accepts the connection and never answers (hung,
// paused, another service's port) ends the command instead of holding it
// until Ctrl-C. No call of the commands takes an engine that long to begin
// answering.
var engineAnswerTimeout = 30 * time.Second

// endpointClient is emulator.Client for a command's --endpoint, with
// engineAnswerTimeout bounding each try's wait for the answer's headers,
// an answer without DynamoDB's headers refused (checkDynamoHeaders), and
// an answer that lacks what DynamoDB's always carries refused
// (checkAnswerShape).
func endpointClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.ResponseHeaderTimeout = engineAnswerTimeout
	})
	if extra := endpointClientOptions.Load(); extra != nil {
		optFns = append(optFns, *extra...)
	}
	// A call's error never quotes what the call sent (awserr.RedactValues),
	// as against AWS (awsClient, through the functions' client): a
	// rotation sends the signing secrets, and an engine's message may
	// quote the item it refused (RED_TEAM 541).
	return emulator.Client(endpoint, append([]func(*dynamodb.Options){func(o *dynamodb.Options) { o.HTTPClient = hc }, checkDynamoHeaders, checkAnswerShape, awserr.MarkUnanswered, awserr.RedactValues}, optFns...)...)
}

// endpointClientOptions are options tests add to every client
// endpointClient makes (a fault injector); nil in the command.
var endpointClientOptions atomic.Pointer[[]func(*dynamodb.Options)]
