package conform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/idemkit/idemkit/client"
)

// maxBody bounds how much of an answer is read.
const maxBody = 1 << 20

// call is one request of a scenario.
type call struct {
	method, path string
	keys         []string // Idempotency-Key header lines; none when empty
	body         string
	tenant       int         // index into APIKeys
	bearer       string      // when set, the API key sent instead of APIKeys[tenant]
	noAuth       bool        // no Authorization header
	header       http.Header // further request headers
	// url, when set, is the absolute URL requested (one the API named, on
	// its own origin) instead of BaseURL + path; path then only labels it.
	url string
}

// answer is what came back.
type answer struct {
	status     int
	header     http.Header
	body       []byte
	code       string // error code of an envelope body
	sent, done time.Time
	// object: under the profile, a replay names the object the key created
	// as it is now (the commerce policy's Action), so two answers are the
	// same when they name the same resource, a final status unchanged.
	object bool
}

func (a *answer) String() string {
	s := fmt.Sprintf("%d", a.status)
	if a.code != "" {
		s += " " + a.code
	}
	return s
}

// is2xx reports a successful answer.
func (a *answer) is2xx() bool { return a.status >= 200 && a.status <= 299 }

// marker returns the replay marker's value, lower-cased ("" when absent).
func (a *answer) marker(r rules) string {
	return strings.ToLower(strings.TrimSpace(a.header.Get(r.replayHeader)))
}

// sameAs reports a byte-identical status and body; under the profile's
// replayObject, a the later answer, b the earlier: the same resource in a
// status it can be in (see sameStatus).
func (a *answer) sameAs(b *answer) bool {
	if a.object && b.object && a.status == b.status {
		// The same resource in a status it can be in (RED_TEAM 460): an id
		// alone passed a replay naming the Action in a status that is no
		// run status, or a final status other than the first answer's.
		if id := resourceID(a.body); id != "" && id == resourceID(b.body) && sameStatus(a.body, b.body) {
			return true
		}
	}
	return a.status == b.status && bytes.Equal(a.body, b.body)
}

// env is what scenarios share.
type env struct {
	cfg   *resolved
	rules rules
}

func (e *env) url(path string) string { return e.cfg.BaseURL + path }

func (e *env) do(ctx context.Context, c call) (*answer, error) {
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	target := e.url(c.path)
	if c.url != "" {
		target = c.url
	}
	req, err := http.NewRequestWithContext(ctx, c.method, target, body)
	if err != nil {
		return nil, err
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	for name, vs := range c.header {
		req.Header.Del(name) // a call's own header replaces a default (Content-Type, Accept)
		for _, v := range vs {
			req.Header.Add(name, v)
		}
	}
	for _, k := range c.keys {
		req.Header.Add("Idempotency-Key", k)
	}
	switch {
	case c.noAuth:
	case c.bearer != "":
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	case c.tenant < len(e.cfg.APIKeys):
		req.Header.Set("Authorization", "Bearer "+e.cfg.APIKeys[c.tenant])
	}
	a := &answer{sent: time.Now(), object: e.rules.replayObject}
	resp, err := e.cfg.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", c.method, c.path, err)
	}
	defer resp.Body.Close()
	a.body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
	a.done = time.Now()
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", c.method, c.path, err)
	}
	a.status, a.header = resp.StatusCode, resp.Header
	if a.status >= 400 {
		a.code = client.ErrorCode(a.body)
	}
	return a, nil
}

// post sends the checked route with one key (none when key is "").
func (e *env) post(ctx context.Context, key, body string, tenant int) (*answer, error) {
	c := call{method: e.cfg.method, path: e.cfg.path, body: body, tenant: tenant}
	if key != "" {
		c.keys = []string{key}
	}
	return e.do(ctx, c)
}

// variant returns body with one more member, so that its digest differs:
// inputs.conformVariant when body has an "inputs" object, else
// conformVariant at the top level.
func variant(body string) string {
	var obj map[string]any
	if json.Unmarshal([]byte(body), &obj) != nil || obj == nil {
		return body + " " // resolve() guarantees an object; unreachable
	}
	nonce := client.NewCompactKey()
	if in, ok := obj["inputs"].(map[string]any); ok {
		in["conformVariant"] = nonce
	} else {
		obj["conformVariant"] = nonce
	}
	b, _ := json.Marshal(obj)
	return string(b)
}

// resourceID returns the "runId" (or "id") member of a created resource.
// runStatuses are the statuses a run snapshot may carry (OpenWOP's
// run-snapshot schema).
var runStatuses = map[string]bool{
	"pending": true, "running": true, "paused": true, "waiting-approval": true,
	"waiting-input": true, "waiting-external": true, "completed": true,
	"failed": true, "cancelling": true, "cancelled": true,
}

// sameStatus reports that later, a replay of the answer earlier, names the
// Action in a status it can be in: earlier's, or, when earlier's is not
// final, a run status (the Action moved on). A final status never changes.
func sameStatus(later, earlier []byte) bool {
	l, e := status(later), status(earlier)
	return l == e || (!settled(e) && (runStatuses[l] || cancelled(l)))
}

func resourceID(body []byte) string {
	var obj map[string]any
	if json.Unmarshal(body, &obj) != nil {
		return ""
	}
	for _, k := range []string{"runId", "id"} {
		if s, ok := obj[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// identifiers returns the string values of at least 8 characters in a JSON
// body (ids, URLs) that are not copied from the request: if one of them shows
// up in another answer, that answer leaks this one.
func identifiers(body []byte, request string) []string {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			if len(t) >= 8 && !strings.Contains(request, t) {
				out = append(out, t)
			}
		case map[string]any:
			for _, x := range t {
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		}
	}
	walk(v)
	return out
}

// leaks reports whether b contains the body of a, or one of a's identifiers
// (request is the body that produced a).
func leaks(b, a *answer, request string) (string, bool) {
	if len(a.body) > 0 && bytes.Contains(b.body, a.body) {
		return "the whole cached body", true
	}
	for _, id := range identifiers(a.body, request) {
		if bytes.Contains(b.body, []byte(id)) {
			return fmt.Sprintf("%q from the cached body", id), true
		}
	}
	return "", false
}

func oneOf(code string, set []string) bool {
	if len(set) == 0 {
		return true
	}
	for _, s := range set {
		if code == s {
			return true
		}
	}
	return false
}

func statusIn(status int, set []int) bool {
	for _, s := range set {
		if status == s {
			return true
		}
	}
	return false
}
