package dynamostore_test

import (
	"encoding/json"
	"testing"

	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestERPDifferentWorkOrderNeverReplaysAnother: on the work-order route,
// under one key, a body the contract does not define is refused 400
// validation_error in JSON and XML alike, before any claim, and never
// answered with the replay of another work order: invalid UTF-8 (no lossy
// decoding), a charset other than UTF-8, unknown, duplicate or
// other-case members and elements, attributes, a root in a foreign
// namespace, elements inside a scalar element; project codes upper-cased
// by ASCII rules only, so "ıd" and "ID" are two codes. On every engine.
func TestERPDifferentWorkOrderNeverReplaysAnother(t *testing.T) {
	const px = `<project><code>P-1</code><name>Pump</name><quantity>2</quantity></project>`
	xmlWO := func(inner string) string {
		return `<work_order><work_order_number>WO-1</work_order_number>` + inner + `</work_order>`
	}
	refused := []struct{ name, ct, body string }{
		{"JSON invalid UTF-8 (\\xff)", "application/json", `{"work_order_number":"WO-` + "\xff" + `","projects":[{"code":"P-1","quantity":2}]}`},
		{"JSON invalid UTF-8 (\\xfe)", "application/json", `{"work_order_number":"WO-` + "\xfe" + `","projects":[{"code":"P-1","quantity":2}]}`},
		{"JSON Latin-1 declared (\\xe9)", "application/json; charset=iso-8859-1", `{"work_order_number":"WO-1","projects":[{"code":"P-1","name":"Caf` + "\xe9" + `","quantity":2}]}`},
		{"JSON Latin-1 declared (\\xe8)", "application/json; charset=iso-8859-1", `{"work_order_number":"WO-1","projects":[{"code":"P-1","name":"Caf` + "\xe8" + `","quantity":2}]}`},
		{"JSON ASCII body declared Latin-1", "application/json; charset=ISO-8859-1", woJSON},
		{"JSON lone surrogate escape", "application/json", `{"work_order_number":"WO-\ud800","projects":[{"code":"P-1","quantity":2}]}`},
		{"JSON member in another case", "application/json", `{"WORK_ORDER_NUMBER":"WO-1","projects":[{"code":"p-1","name":"Pump","quantity":2},{"code":"P-2","name":"Valve","quantity":1}]}`},
		{"JSON duplicate member", "application/json", `{"work_order_number":"WO-1","work_order_number":"WO-9","projects":[{"code":"p-1","name":"Pump","quantity":2},{"code":"P-2","name":"Valve","quantity":1}]}`},
		{"JSON unknown member", "application/json", `{"work_order_number":"WO-1","extra":true,"projects":[{"code":"p-1","name":"Pump","quantity":2},{"code":"P-2","name":"Valve","quantity":1}]}`},
		{"XML invalid UTF-8", "application/xml", xmlWO(`<projects><project><code>P-` + "\xff" + `</code><quantity>2</quantity></project></projects>`)},
		{"XML declared Latin-1", "application/xml", `<?xml version="1.0" encoding="ISO-8859-1"?>` + xmlWO(`<projects>`+px+`</projects>`)},
		{"XML Latin-1 charset parameter", "application/xml; charset=iso-8859-1", xmlWO(`<projects>` + px + `</projects>`)},
		{"XML surrogate reference", "application/xml", xmlWO(`<projects><project><code>P-&#xD800;</code><quantity>2</quantity></project></projects>`)},
		{"XML unknown element", "application/xml", xmlWO(`<extra>1</extra><projects>` + px + `</projects>`)},
		{"XML unknown attribute", "application/xml", `<work_order id="9"><work_order_number>WO-1</work_order_number><projects>` + px + `</projects></work_order>`},
		{"XML duplicate element", "application/xml", xmlWO(`<work_order_number>WO-2</work_order_number><projects>` + px + `</projects>`)},
		{"XML element inside a scalar", "application/xml", xmlWO(`<projects><project><code>P-1<x>2</x></code><quantity>2</quantity></project></projects>`)},
		{"XML foreign namespace", "application/xml", `<work_order xmlns="urn:example:other"><work_order_number>WO-1</work_order_number><projects>` + px + `</projects></work_order>`},
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		clk := clock.NewManual(v.now)
		g := workOrderGuard(t, v.s, clk, nil)
		h := &woHandler{}
		key := erpKey()
		const original = `{"work_order_number":"WO-1","projects":[{"code":"P-1","name":"Pump","quantity":2}]}`
		if r := call(t, g.HTTPAPI(h.serve), workOrderEvent(key, "application/json", original)); r.StatusCode != 201 {
			t.Fatalf("original: %d %s", r.StatusCode, r.Body)
		}
		v.cnt.Reset()
		for _, c := range refused {
			for _, k := range []string{key, erpKey()} { // under the original's key and under a fresh one
				r := call(t, g.HTTPAPI(h.serve), workOrderEvent(k, c.ct, c.body))
				var env map[string]any
				_ = json.Unmarshal([]byte(r.Body), &env)
				if r.StatusCode != 400 || env["error"] != "validation_error" || r.Headers[erp.HeaderReplayed] == "true" {
					t.Errorf("%s: %d %v %s, want 400 validation_error and no replay", c.name, r.StatusCode, r.Headers, r.Body)
				}
			}
		}
		if n := v.cnt.Total(); n != 0 || h.runs.Load() != 1 {
			t.Fatalf("refused bodies: %d round trips, %d executions; want 0 and the original's 1", n, h.runs.Load())
		}
		// Codes are upper-cased by ASCII rules only: "ıd" (dotless i) and
		// "ſku" (long s) are not "ID" and "SKU"; under one key they conflict.
		for _, pair := range [][2]string{{"id", "ıd"}, {"sku", "ſku"}, {"k-1", "\u212a-1"}, {"P-1", "\u00a0P-1"}} {
			k := erpKey()
			body := func(code string) string {
				return `{"work_order_number":"WO-1","projects":[{"code":"` + code + `","quantity":2}]}`
			}
			if r := call(t, g.HTTPAPI(h.serve), workOrderEvent(k, "application/json", body(pair[0]))); r.StatusCode != 201 {
				t.Fatalf("code %q: %d %s", pair[0], r.StatusCode, r.Body)
			}
			if r := call(t, g.HTTPAPI(h.serve), workOrderEvent(k, "application/json", body(pair[1]))); r.StatusCode != 409 || r.Headers[erp.HeaderReplayed] == "true" {
				t.Errorf("code %q after %q under one key: %d %v %s, want 409 IDEMPOTENCY_KEY_CONFLICT", pair[1], pair[0], r.StatusCode, r.Headers, r.Body)
			}
		}
	})
}
