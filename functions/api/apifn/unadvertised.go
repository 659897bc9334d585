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
// unadvertisedOps.
func unadvertised(method, rawPath string) bool {
	for _, op := range unadvertisedOps {
		if op.method == method && op.path == rawPath {
			return true
		}
	}
	return false
}
