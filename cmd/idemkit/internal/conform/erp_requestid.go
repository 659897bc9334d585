package conform

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// requestIDEverywhere: under the ERP policy every answer of the host
// carries X-Request-ID and every error envelope its request_id equal to
// it, the answers made before any route runs included: a 401 without a
// credential, a 404 of an unknown path, a 405 of a wrong method on the
// route and a 415 of a body that is neither JSON nor XML.
//
// The 401 is measured and said: the host's own (idemkit dev's gateway, or
// a function that checks the credential itself), which is checked like
// the others, or API Gateway's own (the deployed stack: its Lambda
// authorizer answers {"message":"Unauthorized"} with an apigw-requestid
// header before the function runs, and an HTTP API cannot rewrite it),
// which carries no request id of the host and is reported as such.
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
	measured := "the host's own 401"
	for _, tc := range cases {
		a, err := e.do(ctx, tc.c)
		if err != nil {
			return failErr(err)
		}
		id := a.header.Get("X-Request-ID")
		if tc.status == http.StatusUnauthorized && a.status == tc.status && apiGatewayOwn(a) {
			measured = "API Gateway's own 401 (its Lambda authorizer, before the function runs: apigw-requestid " + a.header.Get("Apigw-Requestid") + ", no X-Request-ID)"
			continue
		}
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
	if strings.HasPrefix(measured, "API") {
		return pass("404, 405 and 415 carry X-Request-ID and the same request_id; measured %s", measured)
	}
	return pass("401, 404, 405 and 415 carry X-Request-ID and the same request_id; measured %s", measured)
}

// apiGatewayOwn reports whether a is an answer API Gateway made itself:
// its apigw-requestid header, no X-Request-ID, and its {"message": ...}
// body with no other member.
func apiGatewayOwn(a *answer) bool {
	if a.header.Get("Apigw-Requestid") == "" || a.header.Get("X-Request-ID") != "" {
		return false
	}
	var m map[string]any
	if json.Unmarshal(a.body, &m) != nil || len(m) != 1 {
		return false
	}
	_, ok := m["message"].(string)
	return ok
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
