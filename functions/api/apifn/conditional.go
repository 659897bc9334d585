package apifn

import (
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/header"
)

// varyRun is the Vary of a run snapshot: the representation depends on
// the credential (another tenant's run is 404).
const varyRun = "Authorization"

// notModified evaluates If-None-Match against the ETag of a 2xx answer as
// RFC 9110 §13.1.2 defines it: "*" matches any current representation,
// otherwise the header is a comma-separated list of entity tags compared
// weakly (W/"3" matches "3"). A request Cache-Control: no-cache does not
// suppress the evaluation. It is called only where the unconditional
// answer would be 2xx, so a run the caller cannot read stays 404.
func notModified(h map[string]string, etag string) bool {
	values := header.Values(h, "If-None-Match")
	if len(values) == 0 || etag == "" {
		return false
	}
	want := opaqueTag(etag)
	for _, v := range values {
		for _, member := range splitTags(v) {
			if member == "*" || opaqueTag(member) == want {
				return true
			}
		}
	}
	return false
}

// opaqueTag is an entity tag without its weakness indicator: W/"x" and "x"
// compare equal under the weak comparison.
func opaqueTag(t string) string {
	return strings.TrimPrefix(strings.TrimSpace(t), "W/")
}

// splitTags splits an If-None-Match value into its members; a comma inside
// a quoted tag does not split it.
func splitTags(v string) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				out = append(out, strings.TrimSpace(v[start:i]))
				start = i + 1
			}
		}
	}
	if last := strings.TrimSpace(v[start:]); last != "" {
		out = append(out, last)
	}
	return out
}

// notModifiedResp is the 304 answering a matching If-None-Match: no body,
// the ETag and the Vary the 200 would carry.
func notModifiedResp(etag, vary string) events.APIGatewayV2HTTPResponse {
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNotModified, Headers: map[string]string{"ETag": etag, "Vary": vary}}
}
