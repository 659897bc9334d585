package apifn

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/shared"
)

// oaOperation is what the tests read of an OpenAPI operation.
type oaOperation struct {
	OperationID string           `json:"operationId" yaml:"operationId"`
	Description string           `json:"description" yaml:"description"`
	Security    *[]any           `json:"security" yaml:"security"`
	Parameters  []map[string]any `json:"parameters" yaml:"parameters"`
	Responses   map[string]any   `json:"responses" yaml:"responses"`
}

// oaMethods are the operation keys of an OpenAPI path item.
var oaMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// oaOps reads the operations of an OpenAPI document's paths by
// "METHOD path" (the method upper-case).
func oaOps(t *testing.T, paths map[string]map[string]any) map[string]oaOperation {
	t.Helper()
	out := map[string]oaOperation{}
	for p, item := range paths {
		for m, raw := range item {
			if !slices.Contains(oaMethods, m) {
				continue
			}
			b, err := json.Marshal(raw)
			if err != nil {
				t.Fatal(err)
			}
			var op oaOperation
			if err := json.Unmarshal(b, &op); err != nil {
				t.Fatalf("%s %s: %v", m, p, err)
			}
			out[strings.ToUpper(m)+" "+p] = op
		}
	}
	return out
}

// ownDoc is the embedded document, parsed.
func ownDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	return doc
}

// ownOps is the embedded document's operations by "METHOD path".
func ownOps(t *testing.T) map[string]oaOperation {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatal(err)
	}
	return oaOps(t, doc.Paths)
}

// resolve follows a local "#/..." $ref in doc; ok is false when it names
// nothing there.
func resolve(doc map[string]any, ref string) (any, bool) {
	ptr, local := strings.CutPrefix(ref, "#")
	if !local {
		return nil, false
	}
	var cur any = doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// deref follows $refs from v until it is not one.
func deref(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	for range 10 {
		m, _ := v.(map[string]any)
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		if v, ok = resolve(doc, ref); !ok {
			t.Fatalf("$ref %q resolves to nothing", ref)
		}
	}
	t.Fatalf("a $ref chain longer than 10: %v", v)
	return nil
}

// TestOpenAPIDocumentIsTheRouteTable: the document GET /openapi.json serves
// describes exactly the route table: every row of Routes is an operation at
// its pattern and method, under the row's operation id (a HEAD row sharing
// its GET row's id has none: ids are unique in a document), public exactly
// where the row is (security: [] overrides the bearer scheme), with
// Idempotency-Key on exactly the idempotent rows and every path parameter
// of the pattern declared; and every operation of the document is a row.
func TestOpenAPIDocumentIsTheRouteTable(t *testing.T) {
	ops := ownOps(t)
	doc := ownDoc(t)
	served := map[string]bool{}
	ids := map[string]string{}
	for _, r := range Routes {
		k := r.Method + " " + r.Pattern
		served[k] = true
		op, ok := ops[k]
		if !ok {
			t.Errorf("route %s (%s) is served but not in openapi.json", k, r.Op)
			continue
		}
		sharesGet := r.Method == http.MethodHead && slices.ContainsFunc(Routes, func(g Route) bool {
			return g.Method == http.MethodGet && g.Pattern == r.Pattern && g.Op == r.Op
		})
		switch {
		case sharesGet && op.OperationID != "":
			t.Errorf("%s: operationId %q; the GET operation holds %q (ids are unique)", k, op.OperationID, r.Op)
		case !sharesGet && op.OperationID != r.Op:
			t.Errorf("%s: operationId %q, the route table says %q", k, op.OperationID, r.Op)
		}
		if prev, dup := ids[op.OperationID]; dup && op.OperationID != "" {
			t.Errorf("operationId %q on %s and %s", op.OperationID, prev, k)
		}
		ids[op.OperationID] = k
		public := op.Security != nil && len(*op.Security) == 0
		if public != r.Public || op.Security != nil && !public {
			t.Errorf("%s: security %v in openapi.json, Public=%v in the route table", k, op.Security, r.Public)
		}
		params := map[string]bool{}
		for _, p := range op.Parameters {
			p = deref(t, doc, p)
			params[p["in"].(string)+" "+strings.ToLower(p["name"].(string))] = true
		}
		if params["header idempotency-key"] != r.Idempotent {
			t.Errorf("%s: Idempotency-Key declared %v, Idempotent=%v", k, params["header idempotency-key"], r.Idempotent)
		}
		if !params["header openwop-version"] {
			t.Errorf("%s: OpenWOP-Version (honoured on every route) not declared", k)
		}
		for _, seg := range strings.Split(r.Pattern, "/") {
			if name, ok := paramName(seg); ok && !params["path "+strings.ToLower(name)] {
				t.Errorf("%s: path parameter %s not declared", k, name)
			}
		}
		if _, ok := op.Responses["406"]; !ok {
			t.Errorf("%s: 406 protocol_version_unsupported (every route) not listed", k)
		}
		if _, ok := op.Responses["401"]; ok == r.Public {
			t.Errorf("%s: 401 listed %v on a route with Public=%v", k, ok, r.Public)
		}
	}
	for k := range ops {
		if !served[k] {
			t.Errorf("openapi.json describes %s, which the route table does not serve", k)
		}
	}
	if len(ops) == 0 {
		t.Fatal("openapi.json has no operations")
	}
}

// TestOpenAPIOperationsAreOpenWOPs: where the OpenWOP v2 OpenAPI document
// (../shared/openwop/api/v2/openapi.yaml) has an operation at a method and
// path, this host's document names it by the same operationId and is
// public exactly where it is; an operationId of the OpenWOP document is
// never used here for another method or path; an operation it does not
// have is a HEAD of one of its GETs or says it is idemkit's own; and the
// credential is the same bearer scheme.
func TestOpenAPIOperationsAreOpenWOPs(t *testing.T) {
	raw, err := os.ReadFile(shared.Path(t, "openwop", "api", "v2", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var theirs struct {
		Paths      map[string]map[string]any `yaml:"paths"`
		Components struct {
			SecuritySchemes map[string]map[string]any `yaml:"securitySchemes"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(raw, &theirs); err != nil {
		t.Fatal(err)
	}
	spec := oaOps(t, theirs.Paths)
	where := map[string]string{}
	for k, op := range spec {
		where[op.OperationID] = k
	}
	for k, op := range ownOps(t) {
		s, inSpec := spec[k]
		switch {
		case inSpec && s.OperationID != op.OperationID:
			t.Errorf("%s: operationId %q, the OpenWOP document's is %q", k, op.OperationID, s.OperationID)
		case inSpec:
			pub := func(o oaOperation) bool { return o.Security != nil && len(*o.Security) == 0 }
			if pub(s) != pub(op) {
				t.Errorf("%s: public %v here, %v in the OpenWOP document", k, pub(op), pub(s))
			}
		case where[op.OperationID] != "" && op.OperationID != "":
			t.Errorf("%s: operationId %q is the OpenWOP document's %s", k, op.OperationID, where[op.OperationID])
		default:
			method, path, _ := strings.Cut(k, " ")
			if _, get := spec["GET "+path]; method == http.MethodHead && get {
				continue
			}
			if !strings.Contains(op.Description, "idemkit's own route") {
				t.Errorf("%s (%s) is not in the OpenWOP document and its description does not say it is idemkit's own route", k, op.OperationID)
			}
		}
	}
	var ours struct {
		Components struct {
			SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDoc, &ours); err != nil {
		t.Fatal(err)
	}
	for name, s := range theirs.Components.SecuritySchemes {
		o := ours.Components.SecuritySchemes[name]
		if o["type"] != s["type"] || o["scheme"] != s["scheme"] {
			t.Errorf("security scheme %s: %v here, %v in the OpenWOP document", name, o, s)
		}
	}
}

// TestOpenAPIDocumentIsWellFormed: the document is JSON, an OpenAPI 3.1.x
// document, every $ref in it is local and resolves inside it, every
// response has a description and states OpenWOP-Version (every answer
// carries it), a HEAD answer lists no body, and every other error answer's
// JSON body is the envelope {error, message, details?}.
func TestOpenAPIDocumentIsWellFormed(t *testing.T) {
	doc := ownDoc(t)
	if v, _ := doc["openapi"].(string); !regexp.MustCompile(`^3\.1\.\d+$`).MatchString(v) {
		t.Errorf("openapi %q, want 3.1.x", v)
	}
	if info, _ := doc["info"].(map[string]any); info["title"] == nil || info["version"] != settings.ProtocolVersion {
		t.Errorf("info %v: title required, version the served protocol version %s", info, settings.ProtocolVersion)
	}
	refs := 0
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				refs++
				if _, ok := resolve(doc, ref); !ok {
					t.Errorf("%s: $ref %q does not resolve inside the document", at, ref)
				}
			}
			for k, e := range v {
				walk(at+"/"+k, e)
			}
		case []any:
			for _, e := range v {
				walk(at+"[]", e)
			}
		}
	}
	walk("#", doc)
	if refs == 0 {
		t.Error("no $ref checked")
	}
	envelope := deref(t, doc, map[string]any{"$ref": "#/components/schemas/Error"})
	if req, _ := envelope["required"].([]any); !slices.Equal(req, []any{"error", "message"}) {
		t.Errorf("the Error schema requires %v, want [error message]", req)
	}
	for k, op := range ownOps(t) {
		for status, r := range op.Responses {
			resp := deref(t, doc, r)
			if d, _ := resp["description"].(string); d == "" {
				t.Errorf("%s %s: no description", k, status)
			}
			hd, _ := resp["headers"].(map[string]any)
			if _, ok := hd["OpenWOP-Version"]; !ok {
				t.Errorf("%s %s: OpenWOP-Version not stated", k, status)
			}
			content, _ := resp["content"].(map[string]any)
			if strings.HasPrefix(k, "HEAD ") {
				if content != nil {
					t.Errorf("%s %s: a HEAD answer has no body, the document lists %v", k, status, content)
				}
				continue
			}
			js, _ := content["application/json"].(map[string]any)
			if status >= "400" && (js == nil || js["schema"].(map[string]any)["$ref"] != "#/components/schemas/Error") {
				t.Errorf("%s %s: the error body is not the envelope: %v", k, status, content)
			}
		}
	}
}

// TestOpenAPIRoute: GET /openapi.json through the API Gateway adapter (a
// payload 2.0 event with no authorizer context, as API Gateway passes a
// route without the authorizer) is 200 with the document, compacted but
// otherwise the embedded file's bytes, as application/json with
// OpenWOP-Version and the discovery document's Cache-Control; HEAD, other
// methods, an unserved OpenWOP-Version and If-None-Match are answered
// exactly as on the discovery route (/.well-known/openwop) — same status,
// error code and headers.
func TestOpenAPIRoute(t *testing.T) {
	f := newFixture(t)
	r, m := f.do(t, ev("GET", "/openapi.json", "", "", ""))
	if r.StatusCode != 200 || r.Headers["Content-Type"] != "application/json" || r.Headers["OpenWOP-Version"] != settings.ProtocolVersion ||
		r.Headers["Cache-Control"] != "public, max-age=300" {
		t.Fatalf("GET /openapi.json: %d %v", r.StatusCode, r.Headers)
	}
	want, err := compactOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	if r.Body != string(want) || !strings.HasPrefix(m["openapi"].(string), "3.1.") {
		t.Fatalf("the body is not the embedded document: %.200s", r.Body)
	}
	type variant struct {
		method string
		header []string
		status int
	}
	for _, v := range []variant{
		{"GET", nil, 200}, {"HEAD", nil, 200}, {"POST", nil, 405}, {"PUT", nil, 405}, {"DELETE", nil, 405}, {"PATCH", nil, 405}, {"OPTIONS", nil, 405},
		{"GET", []string{"openwop-version", "3"}, 406}, {"HEAD", []string{"openwop-version", "1.0"}, 406},
		{"GET", []string{"if-none-match", "*"}, 200}, {"GET", []string{"if-none-match", `"x"`}, 200},
		{"GET", []string{"authorization", "Bearer nobody"}, 200},
	} {
		answer := func(path string) (int, map[string]string, any) {
			e := ev(v.method, path, "", "", "")
			for i := 0; i+1 < len(v.header); i += 2 {
				e.Headers[v.header[i]] = v.header[i+1]
			}
			r, m := f.do(t, e)
			h := map[string]string{}
			for k, val := range r.Headers {
				h[k] = val
			}
			return r.StatusCode, h, m["error"]
		}
		ds, dh, de := answer("/.well-known/openwop")
		st, oh, oe := answer("/openapi.json")
		if st != v.status || st == 405 && oh["Allow"] != "GET, HEAD" {
			t.Errorf("%s %v /openapi.json: %d %v, want %d", v.method, v.header, st, oh, v.status)
		}
		if ds != st || de != oe || !mapsEqualKeys(dh, oh) || dh["Allow"] != oh["Allow"] || dh["Cache-Control"] != oh["Cache-Control"] || dh["Content-Type"] != oh["Content-Type"] {
			t.Errorf("%s %v: /openapi.json %d %v %v, /.well-known/openwop %d %v %v", v.method, v.header, st, oe, oh, ds, de, dh)
		}
	}
}

// mapsEqualKeys reports whether a and b have the same keys.
func mapsEqualKeys(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}
