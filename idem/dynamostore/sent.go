package dynamostore

import (
	"context"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// sendCount counts the HTTP requests one API call hands to the transport
// (SDK retries included). A conditional write that fails on a call with more
// than one request may have failed because of the call's own earlier,
// applied attempt whose response was lost; only then does the store look
// for its own write in the returned item.
type sendCount struct{ n atomic.Int32 }

// option installs the counter for one call (a per-call client option).
func (c *sendCount) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("idemkit.dynamostore.sendCount",
			func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
				c.n.Add(1)
				return next.HandleDeserialize(ctx, in)
			}), middleware.After)
	})
}

func (c *sendCount) retried() bool { return c.n.Load() > 1 }
