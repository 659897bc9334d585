package conform

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The ERP policy's live work-order route: one key binds one work order
// whatever its format, JSON or XML, and a replay answers in the format the
// replay's Accept asks for.

// DefaultWorkOrderRoute is the ERP policy's live work-order route.
const DefaultWorkOrderRoute = "POST /api/v1/inbound/work-orders"

// workOrder returns one work order (a fresh number) as JSON and as the
// same work order in XML: equal after the contract's normalisation
// (surrounding whitespace trimmed, project codes upper-cased).
func workOrder() (jsonBody, xmlBody string) {
	n := "WO-CONFORM-" + strings.ToUpper(randomKey(10, ""))
	jsonBody = fmt.Sprintf(`{"work_order_number":" %s ","projects":[{"code":"p1","name":"Pump","quantity":3}]}`, n)
	xmlBody = fmt.Sprintf(`<work_order><work_order_number>%s</work_order_number><projects><project><code>P1</code><name>Pump</name><quantity>3</quantity></project></projects></work_order>`, n)
	return jsonBody, xmlBody
}

// workOrderPost sends one work order to the live route under key.
func (e *env) workOrderPost(ctx context.Context, key, body, contentType, accept string) (*answer, error) {
	h := http.Header{"Content-Type": {contentType}}
	if accept != "" {
		h["Accept"] = []string{accept}
	}
	return e.do(ctx, call{method: e.cfg.workOrderMethod, path: e.cfg.workOrderPath, keys: []string{key}, body: body, header: h})
}

// firstWorkOrder sends the JSON work order js under a fresh key and returns
// the key and the answer; not ok, r is the scenario's failure (the request
// failed, or its answer is not 2xx).
func (e *env) firstWorkOrder(ctx context.Context, js string) (k string, a1 *answer, r Result, ok bool) {
	k = "ERP-WO-" + strings.ToUpper(randomKey(16, ""))
	a1, err := e.workOrderPost(ctx, k, js, "application/json", "")
	if err != nil {
		return k, nil, failErr(err), false
	}
	if !a1.is2xx() {
		return k, a1, fail("a JSON work order on %s %s got %s, want 2xx", e.cfg.workOrderMethod, e.cfg.workOrderPath, a1), false
	}
	return k, a1, Result{}, true
}

// liveRoute: the live work-order route is served under Idempotency-Key: a
// JSON work order is accepted (2xx, Idempotency-Replayed: false), and the
// same work order sent as XML under the same key is its replay (the
// canonical request hash is the decoded work order's), never a 409
// conflict nor a second execution.
func liveRoute(ctx context.Context, e *env) Result {
	js, xs := workOrder()
	k := "ERP-WO-" + strings.ToUpper(randomKey(16, ""))
	a1, err := e.workOrderPost(ctx, k, js, "application/json", "")
	if err != nil {
		return failErr(err)
	}
	if !a1.is2xx() || a1.marker(e.rules) != "false" {
		return fail("a JSON work order on %s %s got %s (replay %q), want a fresh 2xx", e.cfg.workOrderMethod, e.cfg.workOrderPath, a1, a1.marker(e.rules))
	}
	a2, err := e.workOrderPost(ctx, k, xs, "application/xml", "")
	if err != nil {
		return failErr(err)
	}
	switch {
	case a2.status == http.StatusConflict:
		return fail("the same work order in XML under the key got %s: the request hash is the body's bytes, not the work order's", a2)
	case a2.status != a1.status || a2.marker(e.rules) != "true":
		return fail("the same work order in XML under the key got %s (replay %q), want the JSON original's %d replayed", a2, a2.marker(e.rules), a1.status)
	}
	return pass("a JSON work order and the same work order in XML under one key: %d, then its replay", a1.status)
}

// xmlReplay: a replay of a JSON original with Accept: application/xml
// answers in XML (the Accept is not part of the request hash).
func xmlReplay(ctx context.Context, e *env) Result {
	js, _ := workOrder()
	k, a1, r, ok := e.firstWorkOrder(ctx, js)
	if !ok {
		return r
	}
	a2, err := e.workOrderPost(ctx, k, js, "application/json", "application/xml")
	if err != nil {
		return failErr(err)
	}
	ct := strings.ToLower(a2.header.Get("Content-Type"))
	switch {
	case a2.status != a1.status || a2.marker(e.rules) != "true":
		return fail("the replay with Accept: application/xml got %s (replay %q), want the original's %d replayed", a2, a2.marker(e.rules), a1.status)
	case !strings.Contains(ct, "xml") || !strings.HasPrefix(strings.TrimSpace(string(a2.body)), "<"):
		return fail("the replay with Accept: application/xml answered %q %.60q, want XML", ct, a2.body)
	}
	return pass("a JSON original replayed with Accept: application/xml answers in XML")
}

// workOrderStrict: the work-order contract refuses, in JSON and XML alike,
// what it does not define — invalid UTF-8, a charset other than UTF-8,
// a member in another letter case, a duplicate member, an unknown XML
// element or attribute, a root in a foreign namespace, an element inside a
// scalar — as a 400 before any claim: under the key of a processed work
// order none of them is its replay. And project codes are upper-cased by
// ASCII rules only: "ıd" (dotless i) under the key of "id" is a conflict,
// not a replay.
func workOrderStrict(ctx context.Context, e *env) Result {
	js, _ := workOrder()
	n := strings.TrimSpace(strings.Split(strings.Split(js, `"work_order_number":"`)[1], `"`)[0])
	k, _, r, ok := e.firstWorkOrder(ctx, js)
	if !ok {
		return r
	}
	const px = `<project><code>P1</code><name>Pump</name><quantity>3</quantity></project>`
	xmlWO := func(open, inner string) string {
		return open + `<work_order_number>` + n + `</work_order_number>` + inner + `</work_order>`
	}
	for _, c := range []struct{ label, ct, body string }{
		{"invalid UTF-8", "application/json", `{"work_order_number":"` + n + "\xff" + `","projects":[{"code":"p1","name":"Pump","quantity":3}]}`},
		{"a Latin-1 charset", "application/json; charset=iso-8859-1", `{"work_order_number":"` + n + `","projects":[{"code":"p1","name":"Pump` + "\xe9" + `","quantity":3}]}`},
		{"a member in another letter case", "application/json", `{"Work_Order_Number":"` + n + `","projects":[{"code":"p1","name":"Pump","quantity":3}]}`},
		{"a duplicate member", "application/json", `{"work_order_number":"` + n + `-2","work_order_number":"` + n + `","projects":[{"code":"p1","name":"Pump","quantity":3}]}`},
		{"an unknown XML element", "application/xml", xmlWO(`<work_order>`, `<extra>1</extra><projects>`+px+`</projects>`)},
		{"an XML attribute", "application/xml", xmlWO(`<work_order priority="high">`, `<projects>`+px+`</projects>`)},
		{"a root in a foreign namespace", "application/xml", xmlWO(`<work_order xmlns="urn:conform:other">`, `<projects>`+px+`</projects>`)},
		{"an element inside a scalar", "application/xml", xmlWO(`<work_order>`, `<projects><project><code>P1<b>X</b></code><name>Pump</name><quantity>3</quantity></project></projects>`)},
	} {
		a, err := e.workOrderPost(ctx, k, c.body, c.ct, "")
		if err != nil {
			return failErr(err)
		}
		if !slices.Contains(e.rules.validationStatuses, a.status) || a.marker(e.rules) == "true" {
			return fail("a work order with %s under the key of a processed one got %s (replay %q), want %v: the contract does not define it", c.label, a, a.marker(e.rules), e.rules.validationStatuses)
		}
	}
	code := func(c string) string {
		return `{"work_order_number":"` + n + `-C","projects":[{"code":"` + c + `","name":"Pump","quantity":3}]}`
	}
	k2 := "ERP-WO-" + strings.ToUpper(randomKey(16, ""))
	if a, err := e.workOrderPost(ctx, k2, code("id"), "application/json", ""); err != nil {
		return failErr(err)
	} else if !a.is2xx() {
		return fail("a work order with code \"id\" got %s, want 2xx", a)
	}
	a, err := e.workOrderPost(ctx, k2, code("ıd"), "application/json", "")
	if err != nil {
		return failErr(err)
	}
	if a.status != http.StatusConflict || a.marker(e.rules) == "true" {
		return fail("code \"ıd\" (dotless i) under the key of code \"id\" got %s (replay %q), want 409 %s: codes are upper-cased by ASCII rules only", a, a.marker(e.rules), strings.Join(e.rules.mismatchCodes, "|"))
	}
	return pass("8 bodies the contract does not define got %d; \"ıd\" under the key of \"id\" got 409", e.rules.validationStatuses[0])
}

// xmlErrorAnswer: the route's deterministic business refusal (the
// reference host's 409 NO_PROJECT_PROCESSED: no project at or under its
// quantity limit) asked for with Accept: application/xml is answered as
// the route wrote it, in XML, first and on the replay, with X-Request-ID
// (inside the body too), the key echoed, Idempotency-Replayed and
// Idempotency-Original-Request-ID; never a gateway's envelope in its place.
func xmlErrorAnswer(ctx context.Context, e *env) Result {
	n := "WO-CONFORM-" + strings.ToUpper(randomKey(10, ""))
	body := `{"work_order_number":"` + n + `","projects":[{"code":"p9","name":"Too many","quantity":20000}]}`
	k := "ERP-WO-" + strings.ToUpper(randomKey(16, ""))
	var firstID string
	for i, want := range []string{"false", "true"} {
		a, err := e.workOrderPost(ctx, k, body, "application/json", "application/xml")
		if err != nil {
			return failErr(err)
		}
		if i == 0 && a.is2xx() {
			return skip("the route processed a project of quantity 20000 (%s): needs a work order it refuses with a deterministic 4xx (the reference host: 409 NO_PROJECT_PROCESSED above 10000)", a)
		}
		id := a.header.Get("X-Request-ID")
		if i == 0 {
			firstID = id
		}
		ct := strings.ToLower(a.header.Get("Content-Type"))
		switch {
		case a.status < 400 || a.status >= 500:
			return fail("answer %d: %s, want the route's deterministic 4xx", i+1, a)
		case !strings.Contains(ct, "xml") || !strings.HasPrefix(strings.TrimSpace(string(a.body)), "<"):
			return fail("answer %d with Accept: application/xml: %d %q %.80q, want the route's answer in XML (a gateway envelope in its place?)", i+1, a.status, ct, a.body)
		case id == "" || !strings.Contains(string(a.body), ">"+id+"<"):
			return fail("answer %d in XML: X-Request-ID %q, want it on the answer and inside it", i+1, id)
		case a.header.Get("Idempotency-Key") != k:
			return fail("answer %d in XML does not echo the key (Idempotency-Key %q)", i+1, a.header.Get("Idempotency-Key"))
		case a.marker(e.rules) != want:
			return fail("answer %d in XML: %s %q, want %q", i+1, e.rules.replayHeader, a.marker(e.rules), want)
		case a.header.Get("Idempotency-Original-Request-ID") != firstID:
			return fail("answer %d in XML: Idempotency-Original-Request-ID %q, want the first request's %q", i+1, a.header.Get("Idempotency-Original-Request-ID"), firstID)
		}
	}
	return pass("the route's XML refusal kept its request id, key echo, replay marker and original request id, first and on the replay")
}
