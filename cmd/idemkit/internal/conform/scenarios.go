package conform

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/idemkit/idemkit/client"
)

// keyGrammar: every key inside the profile's grammar is accepted (2xx), and
// every key outside it is rejected with 400 (idempotency_key_invalid under
// openwop).
func keyGrammar(ctx context.Context, e *env) Result {
	accept, reject := keyCases(e.cfg.Profile)
	var problems []string
	for _, kc := range accept {
		a, err := e.do(ctx, call{method: e.cfg.method, path: e.cfg.path, keys: kc.values, body: e.cfg.Body})
		if err != nil {
			return failErr(err)
		}
		if !a.is2xx() {
			problems = append(problems, fmt.Sprintf("valid key (%s) got %s, want 2xx", kc.label, a))
		}
	}
	for _, kc := range reject {
		a, err := e.do(ctx, call{method: e.cfg.method, path: e.cfg.path, keys: kc.values, body: e.cfg.Body})
		if err != nil {
			return failErr(err)
		}
		switch {
		case a.status != http.StatusBadRequest:
			problems = append(problems, fmt.Sprintf("invalid key (%s) got %s, want 400", kc.label, a))
		case !oneOf(a.code, e.rules.invalidCodes):
			problems = append(problems, fmt.Sprintf("invalid key (%s) got 400 %q, want %s", kc.label, a.code, strings.Join(e.rules.invalidCodes, "|")))
		}
	}
	if len(problems) > 0 {
		return fail("%s", strings.Join(problems, "; "))
	}
	return pass("%d valid keys accepted, %d invalid keys rejected with 400", len(accept), len(reject))
}

// replayMarker: a same-key, same-body repeat gets the first answer byte-exact
// with the replay marker; the first answer is not marked as a replay.
func replayMarker(ctx context.Context, e *env) Result {
	r := e.rules
	k := client.NewKey()
	a1, res, ok := e.postOK(ctx, k, e.cfg.Body, "first request")
	if !ok {
		return res
	}
	switch m := a1.marker(r); {
	case m == "true":
		return fail("a first execution carries %s: true", r.replayHeader)
	case r.markFresh && m != "false":
		return fail("a first execution lacks %s: false (got %q)", r.replayHeader, m)
	}
	a2, err := e.post(ctx, k, e.cfg.Body, 0)
	if err != nil {
		return failErr(err)
	}
	if !a2.sameAs(a1) {
		return fail("same-key repeat got %s %.80q, want the cached %d answer byte-exact", a2, a2.body, a1.status)
	}
	if m1, m2 := mediaType(a1), mediaType(a2); m1 != m2 {
		// The same bytes under another media type are another answer: a
		// client reads them otherwise (RED_TEAM 462).
		return fail("same-key repeat got Content-Type %q, want the cached answer's %q", a2.header.Get("Content-Type"), a1.header.Get("Content-Type"))
	}
	if m := a2.marker(r); m != "true" {
		return fail("a replayed answer lacks %s: true (got %q)", r.replayHeader, m)
	}
	return pass("replayed byte-exact with %s: true", r.replayHeader)
}

// mediaType is an answer's Content-Type without its parameters, lower-cased.
func mediaType(a *answer) string {
	ct := a.header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		return mt
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// requestIDs checks the ERP policy's response headers of a first answer and its
// replay.
func requestIDs(key string, first, replay *answer) string {
	for _, a := range []*answer{first, replay} {
		if got := a.header.Get("Idempotency-Key"); got != key {
			return fmt.Sprintf("Idempotency-Key not echoed (got %q)", got)
		}
	}
	id1, id2 := first.header.Get("X-Request-ID"), replay.header.Get("X-Request-ID")
	switch {
	case id1 == "" || id2 == "":
		return "X-Request-ID missing"
	case id1 == id2:
		return "the replay's X-Request-ID is the first request's: it must be the new attempt's id"
	case first.header.Get("Idempotency-Original-Request-ID") != id1:
		return "a first answer's Idempotency-Original-Request-ID is not its X-Request-ID"
	case replay.header.Get("Idempotency-Original-Request-ID") != id1:
		return fmt.Sprintf("the replay's Idempotency-Original-Request-ID is %q, want the first request's X-Request-ID", replay.header.Get("Idempotency-Original-Request-ID"))
	}
	return ""
}

// mismatch: a different body under a used key gets 409 with the mismatch
// code, carries nothing of the cached answer, and leaves the record intact.
func mismatch(ctx context.Context, e *env) Result {
	k := client.NewKey()
	a1, r, ok := e.postOK(ctx, k, e.cfg.Body, "first request")
	if !ok {
		return r
	}
	a2, err := e.post(ctx, k, variant(e.cfg.Body), 0)
	if err != nil {
		return failErr(err)
	}
	if a2.status != http.StatusConflict || !oneOf(a2.code, e.rules.mismatchCodes) {
		return fail("a different body under a used key got %s, want 409 %s", a2, strings.Join(e.rules.mismatchCodes, "|"))
	}
	if what, ok := leaks(a2, a1, e.cfg.Body); ok {
		return fail("the mismatch 409 carries %s", what)
	}
	if m := e.rules.mismatchMessage; m != "" && envelopeMessage(a2.body) != m {
		return fail("the mismatch 409's message is %q, want %q", envelopeMessage(a2.body), m)
	}
	if a2.marker(e.rules) == "true" {
		return fail("the mismatch 409 is marked as a replay")
	}
	if r, ok := e.postSame(ctx, k, e.cfg.Body, a1, "after the mismatch, the original request got %s, want its cached answer"); !ok {
		return r
	}
	return pass("409 %s without the cached body; the record is intact", a2.code)
}

// maxLiveRetryAfter is the longest Retry-After accepted on an in-flight 409
// while the first request is still running (the ERP policy's 2 s).
const maxLiveRetryAfter = 2 * time.Second

// dupCount is how many duplicates the in-flight scenario sends.
const dupCount = 3

// inFlight: a slow request and, while it runs, dupCount duplicates with the
// same key and body. Exactly one of them must run (one fresh 2xx); every other
// one gets 409 in-flight with a Retry-After of at most 2 s, since the first
// request is still running (and no retry timing in details), or
// waits for the winner's final answer and receives it marked as a replay. A
// repeat after they all finished is the winner's answer. Whichever request
// the server claims first is the winner: the checker does not assume the
// first one sent arrives first.
func inFlight(ctx context.Context, e *env) Result {
	type res struct {
		a   *answer
		err error
	}
	k := client.NewKey()
	body := e.cfg.SlowBody
	answers := make(chan res, 1+dupCount)
	send := func() {
		a, err := e.post(ctx, k, body, 0)
		answers <- res{a, err}
	}
	go send()
	select {
	case <-time.After(e.cfg.Stagger):
	case <-ctx.Done():
	}
	for range dupCount {
		go send()
	}
	var all []*answer
	var sendErr error
	for range 1 + dupCount {
		r := <-answers
		if r.err != nil {
			sendErr = r.err
			continue
		}
		all = append(all, r.a)
	}
	if sendErr != nil {
		return fail("a request got no bounded answer: %v", sendErr)
	}

	var done []*answer // 2xx answers
	n409 := 0
	for _, d := range all {
		switch {
		case e.rules.inFlightPending && d.status == http.StatusConflict:
			return fail("a duplicate of a request in progress got %s: this policy answers the pending action (202 with Retry-After) once a sync duplicate's wait ends, never 409", d)
		case e.rules.inFlightPending && d.status == http.StatusAccepted:
			ra, ok := client.RetryAfter(d.header.Get("Retry-After"), time.Now())
			if !ok || ra > maxLiveRetryAfter {
				return fail("a duplicate got the pending action (202) with Retry-After %q, want a poll interval of at most %s", d.header.Get("Retry-After"), maxLiveRetryAfter)
			}
			n409++ // told to come back
			continue
		case d.status == http.StatusConflict && oneOf(d.code, e.rules.inFlightCodes):
			ra, ok := client.RetryAfter(d.header.Get("Retry-After"), time.Now())
			if !ok {
				return fail("a duplicate got 409 %s without a valid Retry-After (got %q)", d.code, d.header.Get("Retry-After"))
			}
			// The first request was running (it answered later), so its owner
			// was alive: a useful Retry-After is a short poll interval.
			if want := e.rules.inFlightRetryAfter; want != "" && d.header.Get("Retry-After") != want {
				return fail("a duplicate got 409 %s with Retry-After %q, want %q", d.code, d.header.Get("Retry-After"), want)
			}
			if ra > maxLiveRetryAfter {
				return fail("a duplicate got 409 %s with Retry-After %q while the first request was still running; "+
					"a live owner's duplicate should be told to poll again within %s (a client with a 30 s budget gives up on a longer wait)",
					d.code, d.header.Get("Retry-After"), maxLiveRetryAfter)
			}
			if key := retryTiming(d.body); key != "" && e.rules.noRetryDetails {
				return fail("the in-flight 409 carries retry timing in details (%q)", key)
			}
			if d.marker(e.rules) == "true" {
				return fail("the in-flight 409 is marked as a replay")
			}
			n409++
		case d.is2xx():
			done = append(done, d)
		default:
			return fail("a request of the same-key group got %s, want 2xx, or 409 %s with Retry-After", d, strings.Join(e.rules.inFlightCodes, "|"))
		}
	}
	if len(done) == 0 {
		return fail("no request of the same-key group completed: all got 409")
	}
	var winner *answer
	fresh := 0
	for _, d := range done {
		if d.marker(e.rules) != "true" {
			fresh++
			winner = d
		}
	}
	switch {
	case fresh == 0:
		return fail("every 2xx of the same-key group is marked as a replay: none is the first execution")
	case fresh > 1:
		for _, d := range done {
			if !d.sameAs(winner) {
				return fail("%d same-key requests in flight together got fresh answers with different bodies: the request ran %d times", fresh, fresh)
			}
		}
		return fail("%d same-key requests in flight together got the answer unmarked: the request ran more than once, or a waited duplicate lacks %s: true", fresh, e.rules.replayHeader)
	}
	for _, d := range done {
		if !d.sameAs(winner) {
			return fail("a waiting duplicate got %d %.80q, want the winner's answer", d.status, d.body)
		}
	}
	if e.rules.inFlightNoWait {
		for _, d := range done {
			if d != winner && d.sent.Before(winner.done) {
				return late(fail("a duplicate sent while the first request was in progress was held for its answer: want 409 %s at once", strings.Join(e.rules.inFlightCodes, "|")))
			}
		}
	}
	overlapped := 0
	for _, d := range all {
		if d != winner && d.sent.Before(winner.done) {
			overlapped++
		}
	}
	if overlapped == 0 {
		return late(skip("the first request finished in %v, before its duplicates were sent: no in-flight window (use a slower body)", winner.done.Sub(winner.sent).Round(time.Millisecond)))
	}
	after, err := e.post(ctx, k, body, 0)
	if err != nil {
		return failErr(err)
	}
	if !after.sameAs(winner) {
		return fail("a repeat after the group finished got %s, want the winner's cached answer", after)
	}
	told := "409"
	if e.rules.inFlightPending {
		told = "the pending action (202)"
	}
	return pass("%d duplicate(s) in flight: %d got %s with Retry-After, %d waited for the winner's answer; ran once", overlapped, n409, told, len(done)-1)
}

// retryTiming returns a details member that looks like retry timing
// (OpenWOP: "no retry timing in details"), or "".
func retryTiming(body []byte) string {
	var env struct {
		Details map[string]json.RawMessage `json:"details"`
	}
	if json.Unmarshal(body, &env) != nil {
		return ""
	}
	for k := range env.Details {
		l := strings.ToLower(k)
		if strings.Contains(l, "retry") || strings.Contains(l, "after") || strings.Contains(l, "wait") || strings.Contains(l, "backoff") {
			return k
		}
	}
	return ""
}

// getIgnoresKey: GET never honours Idempotency-Key: no replay marker on a
// repeated same-key GET, and a malformed key is not rejected.
func getIgnoresKey(ctx context.Context, e *env) Result {
	pk := client.NewKey()
	a, r, ok := e.postOK(ctx, pk, e.cfg.Body, "creating a resource")
	if !ok {
		return r
	}
	id := resourceID(a.body)
	if id == "" {
		// No resource to read: no rule broken, and no --get helps, since a
		// GET path holds {id} (RED_TEAM 590).
		return skip("the created answer names no runId or id (a JSON member of that name), so there is no resource to GET with the key")
	}
	path := strings.ReplaceAll(e.cfg.GetPath, "{id}", url.PathEscape(id))
	get := func(key string) (*answer, error) {
		return e.do(ctx, call{method: http.MethodGet, path: path, keys: []string{key}})
	}
	k := client.NewKey()
	malformed := "not a valid key!"
	if e.cfg.Profile == ProfileCommerce {
		malformed = randomKey(commerceMaxKeyChars+1, "") // any shorter string is a commerce key
	}
	for i, key := range []string{k, k, pk, malformed} {
		g, err := get(key)
		if err != nil {
			return failErr(err)
		}
		switch {
		case !g.is2xx() && i == 3:
			return fail("GET %s with a malformed Idempotency-Key got %s: GET must ignore the key", e.cfg.GetPath, g)
		case !g.is2xx():
			return fail("GET %s with an Idempotency-Key got %s, want 2xx", e.cfg.GetPath, g)
		case g.marker(e.rules) == "true" && i == 2:
			return fail("GET with the POST's key was served from the idempotency cache")
		case g.marker(e.rules) == "true":
			return fail("a repeated GET with one key was served from the idempotency cache")
		}
	}
	return pass("GET %s ignored the key (no replay, malformed key not rejected)", e.cfg.GetPath)
}

// tenantIsolation: with two API keys, one idempotency key names two records.
func tenantIsolation(ctx context.Context, e *env) Result {
	if len(e.cfg.APIKeys) < 2 {
		return skip("needs two --api-key flags (two tenants)")
	}
	return isolation(ctx, e, call{tenant: 1}, "tenant 2")
}

// envelopeMessage is the message of an error envelope ("" when none).
func envelopeMessage(body []byte) string {
	var env struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &env)
	return env.Message
}

// validationNotCached: a request rejected with a validation error leaves no
// record: a repeat is not a replay, and a valid request under the same key
// runs.
func validationNotCached(ctx context.Context, e *env) Result {
	k := client.NewKey()
	isValidation := func(a *answer) bool {
		return statusIn(a.status, e.rules.validationStatuses) && oneOf(a.code, e.rules.validationCodes)
	}
	v1, err := e.post(ctx, k, e.cfg.InvalidBody, 0)
	if err != nil {
		return failErr(err)
	}
	if !isValidation(v1) {
		return fail("the invalid body got %s, want a 400 validation error (set the invalid body)", v1)
	}
	v2, err := e.post(ctx, k, e.cfg.InvalidBody, 0)
	if err != nil {
		return failErr(err)
	}
	if v2.marker(e.rules) == "true" {
		return fail("a repeated invalid request was replayed from the idempotency cache")
	}
	if !isValidation(v2) {
		return fail("a repeated invalid request got %s, want the validation error again", v2)
	}
	v3, err := e.post(ctx, k, e.cfg.Body, 0)
	if err != nil {
		return failErr(err)
	}
	if !v3.is2xx() || v3.marker(e.rules) == "true" {
		return fail("a valid request under the key of a rejected one got %s (replay %q), want a fresh 2xx: the validation error was cached", v3, v3.marker(e.rules))
	}
	return pass("%s not cached; the key stayed free", v1)
}
