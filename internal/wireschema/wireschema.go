// Package wireschema is the test oracle for idemkit's OpenWOP v2 wire format:
// the real, closed v2 JSON Schemas in ../shared/openwop/schemas/v2 and the
// v2 OpenAPI document ../shared/openwop/api/v2/openapi.yaml that names, for
// every route, method and status, the schema its response body must satisfy.
// The project keeps no copy of either.
//
// Guarantees:
//   - Draft 2020-12, formats asserted (date-time, uri, ...), patterns in
//     ECMAScript syntax (the schemas use lookaheads, which Go's RE2 lacks).
//   - Local $ref resolution only: every schema file is registered under its
//     own $id (https://openwop.dev/spec/v2/<file>); a $ref that leaves that
//     set fails the compilation instead of being fetched.
//   - Response picks the schema the OpenAPI document names for the
//     response (following response and component $refs); a status the
//     document does not list for the route (405, 413, 415, 431, 500, ...)
//     gets the generic error envelope (components/schemas/Error), so every
//     error is checked against the v2 envelope.
//
// Request bodies are never validated against run-options.schema.json: its
// root carries additionalProperties false although its description calls it
// open, so valid createRun bodies fail it (noted in
// ../shared/openwop/SOURCES.md).
package wireschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/dlclark/regexp2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit/internal/shared"
)

// SchemaBase is the $id prefix of every v2 schema file.
const SchemaBase = "https://openwop.dev/spec/v2/"

// openAPIURL is where the OpenAPI document is registered; its relative
// schema $refs (../../schemas/v2/<file>) are rewritten to SchemaBase+<file>.
const openAPIURL = "https://openwop.dev/api/v2/openapi.json"

// Oracle compiles schemas on demand. Safe for concurrent use.
type Oracle struct {
	mu    sync.Mutex
	c     *jsonschema.Compiler
	api   map[string]any
	cache map[string]*jsonschema.Schema
}

var (
	once    sync.Once
	oracle  *Oracle
	loadErr error
)

// Load returns the oracle built from the shared data (fails under CI=true
// when the data is missing, skips elsewhere; see internal/shared).
func Load(t testing.TB) *Oracle {
	t.Helper()
	dir := shared.Path(t, "openwop")
	once.Do(func() { oracle, loadErr = New(dir) })
	if loadErr != nil {
		t.Fatalf("wireschema: %v", loadErr)
	}
	return oracle
}

type ecmaRegexp regexp2.Regexp

func (re *ecmaRegexp) MatchString(s string) bool {
	ok, err := (*regexp2.Regexp)(re).MatchString(s)
	return err == nil && ok
}

func (re *ecmaRegexp) String() string { return (*regexp2.Regexp)(re).String() }

func compileECMA(s string) (jsonschema.Regexp, error) {
	re, err := regexp2.Compile(s, regexp2.ECMAScript)
	if err != nil {
		return nil, err
	}
	return (*ecmaRegexp)(re), nil
}

// refusingLoader fails every load: all resources are registered up front.
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("wireschema: $ref %s is outside the local schema set (nothing is fetched)", url)
}

// New builds an oracle from an openwop data directory (schemas/v2/*.json and
// api/v2/openapi.yaml).
func New(dir string) (*Oracle, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseRegexpEngine(compileECMA)
	c.UseLoader(refusingLoader{})
	files, err := filepath.Glob(filepath.Join(dir, "schemas", "v2", "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no schemas under %s", filepath.Join(dir, "schemas", "v2"))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		url := SchemaBase + filepath.Base(f)
		if m, ok := doc.(map[string]any); !ok || m["$id"] != url {
			return nil, fmt.Errorf("%s: $id is not %s", f, url)
		}
		if err := c.AddResource(url, doc); err != nil {
			return nil, err
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "api", "v2", "openapi.yaml"))
	if err != nil {
		return nil, err
	}
	var y any
	if err := yaml.Unmarshal(raw, &y); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	y = rewriteRefs(y)
	// Through JSON, so numbers and maps have the types the compiler expects.
	jb, err := json.Marshal(y)
	if err != nil {
		return nil, err
	}
	api, err := jsonschema.UnmarshalJSON(bytes.NewReader(jb))
	if err != nil {
		return nil, err
	}
	if err := c.AddResource(openAPIURL, api); err != nil {
		return nil, err
	}
	m, _ := api.(map[string]any)
	return &Oracle{c: c, api: m, cache: map[string]*jsonschema.Schema{}}, nil
}

// rewriteRefs maps the OpenAPI document's ../../schemas/v2/<file> refs to
// the files' $ids (yaml.v3 decodes maps as map[string]any).
func rewriteRefs(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "$ref" {
				if rest, ok := strings.CutPrefix(s, "../../schemas/v2/"); ok {
					x[k] = SchemaBase + rest
				}
				continue
			}
			x[k] = rewriteRefs(e)
		}
	case []any:
		for i, e := range x {
			x[i] = rewriteRefs(e)
		}
	}
	return v
}

func (o *Oracle) compile(loc string) (*jsonschema.Schema, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.cache[loc]; ok {
		return s, nil
	}
	s, err := o.c.Compile(loc)
	if err != nil {
		return nil, err
	}
	o.cache[loc] = s
	return s, nil
}

// Schema compiles one schema file by name ("run-snapshot.schema.json"),
// optionally with a fragment ("ids.schema.json#/$defs/runId").
func (o *Oracle) Schema(name string) (*jsonschema.Schema, error) {
	return o.compile(SchemaBase + name)
}

// escape is a JSON-pointer token.
func escape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

// Response returns the schema of the JSON body the OpenAPI document names
// for (method, path template, status), and where it came from. A status the
// route does not list gets components/schemas/Error when it is >= 400; a
// non-error status the route does not list, or a route the document does
// not have, is an error (the host serves something the contract lacks).
func (o *Oracle) Response(method, path string, status int) (*jsonschema.Schema, string, error) {
	paths, _ := o.api["paths"].(map[string]any)
	item, _ := paths[path].(map[string]any)
	if item == nil {
		return nil, "", fmt.Errorf("openapi.yaml has no path %s", path)
	}
	m := strings.ToLower(method)
	op, _ := item[m].(map[string]any)
	if op == nil {
		if status >= 400 {
			return o.errorSchema()
		}
		return nil, "", fmt.Errorf("openapi.yaml has no %s %s", method, path)
	}
	resps, _ := op["responses"].(map[string]any)
	code := strconv.Itoa(status)
	r, ok := resps[code].(map[string]any)
	ptr := "#/paths/" + escape(path) + "/" + m + "/responses/" + code
	if !ok {
		if status >= 400 {
			return o.errorSchema()
		}
		return nil, "", fmt.Errorf("openapi.yaml lists no %d for %s %s", status, method, path)
	}
	if ref, ok := r["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/components/responses/")
		comps, _ := o.api["components"].(map[string]any)
		rs, _ := comps["responses"].(map[string]any)
		if r, ok = rs[name].(map[string]any); !found || !ok {
			return nil, "", fmt.Errorf("unresolvable response %s", ref)
		}
		ptr = "#/components/responses/" + escape(name)
	}
	content, _ := r["content"].(map[string]any)
	if _, ok := content["application/json"]; !ok {
		return nil, "", fmt.Errorf("%s %s %d has no application/json body in openapi.yaml", method, path, status)
	}
	loc := ptr + "/content/application~1json/schema"
	s, err := o.compile(openAPIURL + loc)
	return s, "openapi.yaml " + loc, err
}

// Bodiless reports whether the OpenAPI document lists status for (method,
// path template) as a response with no body (the 304 of a conditional GET):
// such an answer must carry no bytes at all. An error when the route or the
// status is not listed.
func (o *Oracle) Bodiless(method, path string, status int) (bool, error) {
	paths, _ := o.api["paths"].(map[string]any)
	item, _ := paths[path].(map[string]any)
	op, _ := item[strings.ToLower(method)].(map[string]any)
	resps, _ := op["responses"].(map[string]any)
	r, ok := resps[strconv.Itoa(status)].(map[string]any)
	if !ok {
		return false, fmt.Errorf("openapi.yaml lists no %d for %s %s", status, method, path)
	}
	_, ref := r["$ref"]
	_, content := r["content"]
	return !ref && !content, nil
}

func (o *Oracle) errorSchema() (*jsonschema.Schema, string, error) {
	s, err := o.compile(openAPIURL + "#/components/schemas/Error")
	return s, "openapi.yaml #/components/schemas/Error", err
}

// Validate checks a JSON document against s.
func Validate(s *jsonschema.Schema, body []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return s.Validate(inst)
}
