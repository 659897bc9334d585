package boot

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// AttrLambdaRequestID is the attribute carrying the Lambda invocation's
// request id on every line logged with the invocation's context.
const AttrLambdaRequestID = "aws_request_id"

// Logger returns the functions' logger: JSON lines on stderr (the
// functions' log groups take Lambda's JSON log format), each line logged
// with an invocation's context carrying its Lambda request id
// (AttrLambdaRequestID), so one invocation's lines can be found together.
func Logger() *slog.Logger { return NewLogger(os.Stderr) }

// NewLogger is Logger writing to w.
func NewLogger(w io.Writer) *slog.Logger {
	return slog.New(invocationHandler{slog.NewJSONHandler(w, nil)})
}

// invocationHandler adds the Lambda request id of the record's context.
type invocationHandler struct{ slog.Handler }

func (h invocationHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String(AttrLambdaRequestID, lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h invocationHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return invocationHandler{h.Handler.WithAttrs(as)}
}

func (h invocationHandler) WithGroup(name string) slog.Handler {
	return invocationHandler{h.Handler.WithGroup(name)}
}
