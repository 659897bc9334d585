// Package streamed marks a request whose answer the Lambda runtime streams
// to its caller (a function URL in response streaming mode, served through
// aws-lambda-go's lambdaurl.Wrap) rather than returning it as one buffered
// invocation payload. idem/idemlambdaurl marks such requests; the net/http
// Guard then bounds their answers by idem.MaxResponseBytes alone, not by
// Lambda's buffered payload bound. It lives apart from both so that package
// idem reads the mark without importing lambdaurl, which links
// aws-lambda-go's lambda package into every program.
package streamed

import "context"

type key struct{}

// With returns ctx marked as a streamed request's.
func With(ctx context.Context) context.Context { return context.WithValue(ctx, key{}, true) }

// In reports whether ctx is marked as a streamed request's (With).
func In(ctx context.Context) bool {
	v, _ := ctx.Value(key{}).(bool)
	return v
}
