package conform

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// requestIDEverywhere: under the ERP policy every answer carries
// X-Request-ID and every error envelope its request_id equal to it, the
// answers made before any route runs included: a 401 without a
// credential, a 404 of an unknown path, a 405 of a wrong method on the
// route and a 415 of a body that is neither JSON nor XML.
func requestIDEverywhere(ctx context.Context, e *env) Result {
	cases := []struct {
		label  string
		c      call
		status int
	}{
		{"no credential", call{method: e.cfg.method, path: e.cfg.path, body: e.cfg.Body, noAuth: true}, http.StatusUnauthorized},
		{"an unknown path", call{method: http.MethodGet, path: "/conform-no-such-route-" + randomKey(12, "")}, http.StatusNotFound},
		{"a wrong method", call{method: http.MethodDelete, path: e.cfg.path}, http.StatusMethodNotAllowed},
		{"a text/plain body", call{method: e.cfg.method, path: e.cfg.path, body: "not json",
			header: http.Header{"Content-Type": {"text/plain"}}}, http.StatusUnsupportedMediaType},
	}
	var problems []string
	for _, tc := range cases {
		a, err := e.do(ctx, tc.c)
		if err != nil {
			return failErr(err)
		}
		id := a.header.Get("X-Request-ID")
		var env struct {
			RequestID *string `json:"request_id"`
		}
		_ = json.Unmarshal(a.body, &env)
		switch {
		case a.status != tc.status:
			problems = append(problems, fmt.Sprintf("%s got %s, want %d", tc.label, a, tc.status))
		case id == "":
			problems = append(problems, fmt.Sprintf("the %d of %s has no X-Request-ID", a.status, tc.label))
		case env.RequestID == nil || *env.RequestID != id:
			problems = append(problems, fmt.Sprintf("the %d envelope of %s has request_id %v, want the X-Request-ID %q", a.status, tc.label, deref(env.RequestID), id))
		}
	}
	if len(problems) > 0 {
		return fail("%s", strings.Join(problems, "; "))
	}
	return pass("401, 404, 405 and 415 carry X-Request-ID and the same request_id")
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
