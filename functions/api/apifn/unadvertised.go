package apifn

import "net/http"

// unadvertisedOps are operations of the OpenWOP v2 run surface that a host
// serves only under a capability gate this host does not advertise. runs.md:
// "A gated operation the host does not advertise answers 404"; on their
// method and path the answer is 404 not_found, never the 405 the path's
// other methods would give (a run's sub-resources this host does not serve,
// such as /runs/{runId}/annotations, match no route at all: see
// matchPattern).
var unadvertisedOps = []struct{ method, path string }{
	{http.MethodGet, "/runs"}, // listRuns, gated on runList
}

// unadvertised reports whether method and rawPath name an operation of
// unadvertisedOps. HEAD names the GET of its path, as it is answered as GET
// would be (RFC 9110 §9.3.2).
func unadvertised(method, rawPath string) bool {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	for _, op := range unadvertisedOps {
		if op.method == method && op.path == rawPath {
			return true
		}
	}
	return false
}

// opGatedOnIdempotency is the operation runs.md gates on the idempotency
// family: getRunEffects (GET /runs/{runId}/effects).
const opGatedOnIdempotency = "getRunEffects"

// gatedOnIdempotency reports whether rawPath is the path of the operation
// gated on the idempotency family, whatever the method. With Layer 1 off
// (a disabled Guard) the family is not advertised (settings.WithLayer1Off),
// so every method on that path answers 404 not_found, as a run's
// sub-resource this host does not serve does, before any credential is
// checked.
func gatedOnIdempotency(rawPath string) bool {
	m, _, found, _ := MatchRoute(http.MethodGet, rawPath)
	return found && m.Route.Op == opGatedOnIdempotency
}
