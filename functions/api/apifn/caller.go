package apifn

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
)

// The caller an inbox belongs to. Under a policy that scopes a key by
// credential parts beside the tenant (idem.Policy.Scope.Credential: the
// commerce policy's namespace and calling worker), the caller is the tenant
// and those parts, so one worker's waiting writes are its own: another
// worker or namespace of the same tenant can neither list, read, resubmit
// nor discard them, and finds them not at all (404, never 403). Under a
// policy that scopes by the tenant alone the caller is the tenant.

// callerOf is the caller of ev within its tenant: an opaque hash of the
// policy's credential parts (names and values, each length-prefixed), or
// "" when the policy names none. It never carries the values themselves.
func (h *Handler) callerOf(ev events.APIGatewayV2HTTPRequest) string {
	names := h.cfg.Guard.Config().Policy.Scope.Credential
	if len(names) == 0 {
		return ""
	}
	var b strings.Builder
	for _, n := range names {
		v := idem.TenantSource{Kind: h.tenant.Kind, Name: n}.TenantV2(&ev.RequestContext)
		for _, s := range []string{n, v} {
			b.WriteString(strconv.Itoa(len(s)))
			b.WriteByte(':')
			b.WriteString(s)
		}
	}
	sum := sha256.Sum256([]byte("idemkit:inbox-caller:v1\x00" + b.String()))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}
