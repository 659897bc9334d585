package conform

import (
	"context"
	"fmt"
	"net/http"
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
	k := "ERP-WO-" + strings.ToUpper(randomKey(16, ""))
	a1, err := e.workOrderPost(ctx, k, js, "application/json", "")
	if err != nil {
		return failErr(err)
	}
	if !a1.is2xx() {
		return fail("a JSON work order on %s %s got %s, want 2xx", e.cfg.workOrderMethod, e.cfg.workOrderPath, a1)
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
