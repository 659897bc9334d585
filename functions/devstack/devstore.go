package devstack

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/apierr"
)

// CodeStoreUnavailable is the (vendor) error code of `idemkit dev`'s 503
// when its DynamoDB store did not answer a request's calls in time or
// could not be reached: the Guard's own (idem.CodeStoreUnavailable).
const CodeStoreUnavailable = idem.CodeStoreUnavailable

// storeRetryAfter is the Retry-After (seconds) of a store_unavailable 503.
const storeRetryAfter = 2

// storeWatch records whether any DynamoDB call made for one request failed
// for want of the store (no answer, a transport error, the request's
// deadline, or a 5xx), as opposed to an answer such as a failed condition.
type storeWatch struct{ failed atomic.Bool }

type storeWatchKey struct{}

// withStoreWatch returns ctx carrying a new storeWatch.
func withStoreWatch(ctx context.Context) (context.Context, *storeWatch) {
	w := &storeWatch{}
	return context.WithValue(ctx, storeWatchKey{}, w), w
}

// storeUnavailable reports whether err, returned by a DynamoDB call after
// the SDK's retries, means the store could not be used (rather than that
// it answered no, or that the request was cancelled).
func storeUnavailable(err error) bool {
	if errors.Is(err, context.Canceled) {
		// The request's client hung up: the store did nothing wrong.
		return false
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		// 0: no response at all (refused, reset, deadline).
		code := re.HTTPStatusCode()
		return code == 0 || code >= 500
	}
	return err != nil
}

// watchStore is a DynamoDB client option: each call made with a context
// from withStoreWatch marks that watch when it fails for want of the store.
func watchStore(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("idemkitStoreWatch",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if w, ok := ctx.Value(storeWatchKey{}).(*storeWatch); ok && storeUnavailable(err) {
					w.failed.Store(true)
				}
				return out, md, err
			}), middleware.Before)
	})
}

// writeStoreUnavailable answers 503 with the error envelope and
// Retry-After, as the api handler answers it to the request reqID
// (gateway.writeEnvelope).
func (g *gateway) writeStoreUnavailable(w http.ResponseWriter, r *http.Request, reqID string) {
	w.Header().Set("Retry-After", strconv.Itoa(storeRetryAfter))
	g.writeEnvelope(w, reqID, storeUnavailableErr(keyedRequest(r)))
}

// storeUnavailableErr is the 503 envelope (Retry-After is set beside it):
// only a request that carried an Idempotency-Key on a route that honours
// it (keyed) is told to retry with the same key.
func storeUnavailableErr(keyed bool) *apierr.Error {
	if keyed {
		return apierr.New(http.StatusServiceUnavailable, CodeStoreUnavailable,
			"the data store did not answer in time; retry after %d s with the same Idempotency-Key", storeRetryAfter)
	}
	return apierr.New(http.StatusServiceUnavailable, CodeStoreUnavailable,
		"the data store did not answer in time; retry after %d s", storeRetryAfter)
}

// keyedRequest reports whether r carries a non-blank Idempotency-Key on a
// route that runs under one (apifn.Route.Idempotent).
func keyedRequest(r *http.Request) bool {
	m, _, found, _ := apifn.MatchRoute(r.Method, r.URL.EscapedPath())
	if !found || !m.Route.Idempotent {
		return false
	}
	for _, v := range r.Header.Values(idem.HeaderKey) {
		if strings.TrimSpace(v) != "" {
			return true
		}
	}
	return false
}
