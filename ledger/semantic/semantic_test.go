package semantic

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

type semanticVectorFile struct {
	Recipe  string `json:"recipe"`
	Vectors []struct {
		ID        string          `json:"id"`
		Input     json.RawMessage `json:"input"`
		Canonical string          `json:"canonical"`
		Digest    string          `json:"digest"`
	} `json:"vectors"`
}

func loadSemanticVectors(t *testing.T) semanticVectorFile {
	t.Helper()
	path := shared.Path(t, "openwop", "conformance", "vectors", "semantic-request-digest-v2.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f semanticVectorFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestSemanticGoldenVectors reproduces every OpenWOP golden vector byte for
// byte: the canonical preimage and the digest.
func TestSemanticGoldenVectors(t *testing.T) {
	f := loadSemanticVectors(t)
	if f.Recipe != RecipeV2 {
		t.Fatalf("vector file recipe %q, RecipeV2 %q", f.Recipe, RecipeV2)
	}
	if len(f.Vectors) != 13 {
		t.Fatalf("want the 13 golden vectors, file has %d", len(f.Vectors))
	}
	byID := map[string]string{}
	for _, v := range f.Vectors {
		t.Run(v.ID, func(t *testing.T) {
			var r Request
			if err := json.Unmarshal(v.Input, &r); err != nil {
				t.Fatalf("decode input: %v", err)
			}
			canon, err := CanonicalV2(r)
			if err != nil {
				t.Fatal(err)
			}
			if string(canon) != v.Canonical {
				t.Errorf("canonical\n got %s\nwant %s", canon, v.Canonical)
			}
			d, err := DigestV2(r)
			if err != nil {
				t.Fatal(err)
			}
			if d != v.Digest {
				t.Errorf("digest %s, want %s", d, v.Digest)
			}
		})
		byID[v.ID] = v.Digest
	}
	// The pairs whose relationship is the point of the vectors.
	same := [][2]string{{"tools-sorted-by-name", "tools-reversed-same-digest"}, {"tools-code-unit-order", "tools-code-unit-order-reversed"}}
	for _, p := range same {
		if byID[p[0]] != byID[p[1]] {
			t.Errorf("%s and %s must share a digest", p[0], p[1])
		}
	}
	differ := [][2]string{{"message-order-is-semantic", "message-order-reversed"}, {"non-ascii-not-normalized", "non-ascii-composed"}, {"minimal", "stop-changes-digest"}, {"minimal", "seed-changes-digest"}, {"minimal", "max-output-changes-digest"}, {"minimal", "provider-options-carried"}}
	for _, p := range differ {
		if byID[p[0]] == byID[p[1]] {
			t.Errorf("%s and %s must differ", p[0], p[1])
		}
	}
}

func semPtr[T any](v T) *T { return &v }

func baseSemantic() Request {
	return Request{
		Provider: "anthropic",
		Model:    "claude-x",
		Messages: []Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hello"}},
		Tools: []Tool{
			{Name: "get_weather", Description: "Weather for a city", Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}},
			{Name: "getTime", Parameters: json.RawMessage(`{"type":"object"}`)},
		},
		ToolChoice:      "auto",
		ResponseFormat:  map[string]any{"type": "json_object"},
		Temperature:     semPtr(0.7),
		TopP:            semPtr(0.9),
		MaxOutputTokens: semPtr[int64](256),
		Stop:            []string{"END", "\n\n"},
		Seed:            semPtr[int64](7),
		Safety:          map[string]any{"level": "strict"},
		Options:         map[string]any{"reasoningEffort": "high"},
		ProviderOptions: map[string]any{"vendor.anthropic.topK": 40},
	}
}

func mustSemanticDigest(t *testing.T, r Request) string {
	t.Helper()
	d, err := DigestV2(r)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSemanticEveryInputChangesDigest: RFC 0150 §C — changing seed, stop,
// the output bound, a tool schema or a provider option (and every other
// semantic input) MUST change the digest.
func TestSemanticEveryInputChangesDigest(t *testing.T) {
	base := mustSemanticDigest(t, baseSemantic())
	changes := map[string]func(r *Request){
		"seed":                 func(r *Request) { r.Seed = semPtr[int64](8) },
		"seed removed":         func(r *Request) { r.Seed = nil },
		"seed zero":            func(r *Request) { r.Seed = semPtr[int64](0) },
		"stop value":           func(r *Request) { r.Stop = []string{"END", "\n"} },
		"stop order":           func(r *Request) { r.Stop = []string{"\n\n", "END"} },
		"stop removed":         func(r *Request) { r.Stop = nil },
		"output bound":         func(r *Request) { r.MaxOutputTokens = semPtr[int64](257) },
		"output bound removed": func(r *Request) { r.MaxOutputTokens = nil },
		"tool schema": func(r *Request) {
			r.Tools[1].Parameters = json.RawMessage(`{"type":"object","required":["tz"]}`)
		},
		"tool schema nested": func(r *Request) {
			r.Tools[0].Parameters = map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "number"}}}
		},
		"tool description": func(r *Request) { r.Tools[0].Description = "Weather" },
		"tool name":        func(r *Request) { r.Tools[1].Name = "gettime" },
		"tool extra field": func(r *Request) { r.Tools[1].Fields = map[string]any{"strict": true} },
		"tool removed":     func(r *Request) { r.Tools = r.Tools[:1] },
		"provider option":  func(r *Request) { r.Options["reasoningEffort"] = "low" },
		"provider option added": func(r *Request) {
			r.Options["budget"] = 1000
		},
		"namespaced option":   func(r *Request) { r.ProviderOptions["vendor.anthropic.topK"] = 41 },
		"option number type":  func(r *Request) { r.Options["reasoningEffort"] = 1 },
		"temperature":         func(r *Request) { r.Temperature = semPtr(0.70000001) },
		"top p":               func(r *Request) { r.TopP = nil },
		"top k":               func(r *Request) { r.TopK = semPtr[int64](40) },
		"tool choice":         func(r *Request) { r.ToolChoice = map[string]any{"type": "tool", "name": "getTime"} },
		"response format":     func(r *Request) { r.ResponseFormat = nil },
		"safety":              func(r *Request) { r.Safety = map[string]any{"level": "lenient"} },
		"model":               func(r *Request) { r.Model = "claude-y" },
		"provider":            func(r *Request) { r.Provider = "anthropic-eu" },
		"message content":     func(r *Request) { r.Messages[1].Content = "hello!" },
		"message role":        func(r *Request) { r.Messages[0].Role = "user" },
		"message order":       func(r *Request) { r.Messages[0], r.Messages[1] = r.Messages[1], r.Messages[0] },
		"message extra field": func(r *Request) { r.Messages[1].Fields = map[string]any{"name": "bob"} },
		"message content part": func(r *Request) {
			r.Messages[1].Content = []any{map[string]any{"type": "text", "text": "hello"}}
		},
		"message whitespace": func(r *Request) { r.Messages[1].Content = "hello " },
		"NFC vs NFD":         func(r *Request) { r.Messages[1].Content = "he\u0301llo" },
	}
	seen := map[string]string{base: "base"}
	for name, change := range changes {
		r := baseSemantic()
		change(&r)
		d := mustSemanticDigest(t, r)
		if prev, dup := seen[d]; dup {
			t.Errorf("change %q gives the same digest as %q", name, prev)
		}
		seen[d] = name
	}
}

// TestSemanticInvariants: what must NOT change the digest.
func TestSemanticInvariants(t *testing.T) {
	base := mustSemanticDigest(t, baseSemantic())
	same := map[string]func(r *Request){
		"tool order": func(r *Request) { r.Tools[0], r.Tools[1] = r.Tools[1], r.Tools[0] },
		"option given namespaced": func(r *Request) {
			delete(r.Options, "reasoningEffort")
			r.ProviderOptions["vendor.anthropic.reasoningEffort"] = "high"
		},
		"raw vs Go value": func(r *Request) {
			r.ResponseFormat = json.RawMessage(` { "type" : "json_object" } `)
		},
		"float spelling": func(r *Request) { r.Temperature = semPtr(0.70000000000000000001) },
		"empty fields":   func(r *Request) { r.Messages[0].Fields = map[string]any{} },
	}
	for name, change := range same {
		r := baseSemantic()
		change(&r)
		if d := mustSemanticDigest(t, r); d != base {
			t.Errorf("%s changed the digest", name)
		}
	}
	// Empty lists are the same request as absent ones.
	a, b := baseSemantic(), baseSemantic()
	a.Stop, b.Stop = nil, []string{}
	a.Tools, b.Tools = nil, []Tool{}
	if mustSemanticDigest(t, a) != mustSemanticDigest(t, b) {
		t.Error("empty vs nil lists differ")
	}
	// The caller's tool slice is not reordered.
	r := baseSemantic()
	mustSemanticDigest(t, r)
	if r.Tools[0].Name != "get_weather" {
		t.Error("DigestV2 reordered the caller's Tools")
	}
}

// TestSemanticWireForm: unknown members are carried (as vendor options, or
// in Fields), transport-only members are excluded, and the wire form and the
// Go form agree.
func TestSemanticWireForm(t *testing.T) {
	const minimal = `{"provider":"anthropic","model":"claude-x","messages":[{"role":"user","content":"hello"}]}`
	digest := func(s string) string {
		t.Helper()
		var r Request
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return mustSemanticDigest(t, r)
	}
	base := digest(minimal)
	withMember := func(m string) string { return strings.Replace(minimal, `{"provider"`, `{`+m+`,"provider"`, 1) }

	// Transport-only members do not reach the digest.
	for _, m := range []string{`"timeout":30`, `"timeoutMs":30000`, `"traceId":"abc"`, `"retryCount":3`, `"credentialHandle":"cred-1"`, `"apiKey":"sk-secret"`} {
		if digest(withMember(m)) != base {
			t.Errorf("transport member %s changed the digest", m)
		}
	}
	// An unknown member is carried as vendor.<provider>.<name>: the same
	// digest as the golden provider-options-carried vector.
	carried := digest(withMember(`"reasoningEffort":"high"`))
	if carried == base {
		t.Fatal("unknown member was dropped")
	}
	if want := digest(withMember(`"providerOptions":{"vendor.anthropic.reasoningEffort":"high"}`)); carried != want {
		t.Errorf("unknown member not carried as vendor.anthropic.reasoningEffort")
	}
	if carried != "fa34555d16eb6fedb2c587a4c4ac7e2cbeec8d0e8be0299b60910fe79c4055bf" {
		t.Errorf("carried option digest %s, want the golden provider-options-carried digest", carried)
	}
	// An integer member written with a fraction part or an exponent is the
	// same JSON number, and JCS writes it as the integer: the golden
	// max-output-changes-digest and seed-changes-digest vectors.
	golden := map[string]string{
		`"maxOutputTokens":256.0`:  "96f74b752619868e3b7fad15f093c03b86b223974ea3e2b89a1831d22a4845ad",
		`"maxOutputTokens":2.56e2`: "96f74b752619868e3b7fad15f093c03b86b223974ea3e2b89a1831d22a4845ad",
		`"seed":7.0`:               "fb942dce9de88688c89d048499f4a4e5a19427775da08d0d5a7ad709c10b42d0",
		`"seed":70E-1`:             "fb942dce9de88688c89d048499f4a4e5a19427775da08d0d5a7ad709c10b42d0",
	}
	for m, want := range golden {
		if got := digest(withMember(m)); got != want {
			t.Errorf("%s: digest %s, want the golden %s", m, got, want)
		}
	}
	// Unknown message and tool members are carried too.
	if digest(strings.Replace(minimal, `"content":"hello"`, `"content":"hello","name":"bob"`, 1)) == base {
		t.Error("unknown message member was dropped")
	}
	withTool := strings.Replace(minimal, `]}`, `],"tools":[{"name":"t","parameters":{}}]}`, 1)
	if digest(withTool) == digest(strings.Replace(withTool, `"parameters":{}`, `"parameters":{},"strict":true`, 1)) {
		t.Error("unknown tool member was dropped")
	}
	// The Go form of the same request has the same digest.
	goForm := Request{Provider: "anthropic", Model: "claude-x", Messages: []Message{{Role: "user", Content: "hello"}}, Options: map[string]any{"reasoningEffort": "high"}}
	if mustSemanticDigest(t, goForm) != carried {
		t.Error("Go form and wire form disagree")
	}
	// Every field of the wire form round-trips into the typed request.
	full := `{"provider":"p","model":"m","messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],
		"tools":[{"name":"b","description":"d","parameters":{"type":"object"}},{"name":"a"}],
		"toolChoice":"auto","responseFormat":{"type":"json"},"temperature":0.5,"topP":1,
		"topK":3,"maxOutputTokens":10,"stop":["s"],"seed":-3,"safetySettings":{"x":1},"providerOptions":{"vendor.p.k":true},"traceId":"t"}`
	var r Request
	if err := json.Unmarshal([]byte(full), &r); err != nil {
		t.Fatal(err)
	}
	canon, err := CanonicalV2(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","provider":"p","providerOptions":{"vendor.p.k":true},"recipe":"openwop-semantic-request-v2","request":{"maxOutputTokens":10,"messages":[{"content":[{"text":"x","type":"text"}],"role":"user"}],"responseFormat":{"type":"json"},"safetySettings":{"x":1},"seed":-3,"stop":["s"],"temperature":0.5,"toolChoice":"auto","tools":[{"name":"a"},{"description":"d","name":"b","parameters":{"type":"object"}}],"topK":3,"topP":1}}`
	if string(canon) != want {
		t.Errorf("full wire form\n got %s\nwant %s", canon, want)
	}
}

func TestSemanticRejections(t *testing.T) {
	cases := map[string]func(r *Request){
		"no provider":            func(r *Request) { r.Provider = "" },
		"no model":               func(r *Request) { r.Model = "" },
		"provider in upper case": func(r *Request) { r.Provider = "Anthropic" },
		"provider with a space":  func(r *Request) { r.Provider = "anthropic " },
		"provider not ASCII":     func(r *Request) { r.Provider = "anthropıc" },
		"message without role":   func(r *Request) { r.Messages[0].Role = "" },
		"tool without name":      func(r *Request) { r.Tools[0].Name = "" },
		"duplicate tool name":    func(r *Request) { r.Tools[1].Name = r.Tools[0].Name },
		"seed beyond 2^53":       func(r *Request) { r.Seed = semPtr[int64](1<<53 + 1) },
		"negative seed too big":  func(r *Request) { r.Seed = semPtr[int64](-(1 << 60)) },
		"bound beyond 2^53":      func(r *Request) { r.MaxOutputTokens = semPtr[int64](math.MaxInt64) },
		"NaN temperature":        func(r *Request) { r.Temperature = semPtr(math.NaN()) },
		"Inf topP":               func(r *Request) { r.TopP = semPtr(math.Inf(1)) },
		"NaN in option":          func(r *Request) { r.Options["x"] = math.NaN() },
		"invalid UTF-8 content":  func(r *Request) { r.Messages[1].Content = "a\xffb" },
		"invalid UTF-8 nested":   func(r *Request) { r.Safety = map[string]any{"k": []any{"\xc3"}} },
		"invalid UTF-8 stop":     func(r *Request) { r.Stop = []string{"\xff"} },
		"invalid UTF-8 model":    func(r *Request) { r.Model = "m\xff" },
		"raw duplicate key":      func(r *Request) { r.ResponseFormat = json.RawMessage(`{"a":1,"a":2}`) },
		"raw lone surrogate":     func(r *Request) { r.Tools[0].Parameters = json.RawMessage(`{"a":"\ud800"}`) },
		"raw invalid JSON":       func(r *Request) { r.ToolChoice = json.RawMessage(`{`) },
		"unsafe integer option":  func(r *Request) { r.Options["x"] = int64(1<<60 + 1) },
		"unsafe integer nested":  func(r *Request) { r.Safety = map[string]any{"k": []any{uint64(1<<63 + 1)}} },
		"raw unsafe integer":     func(r *Request) { r.ResponseFormat = json.RawMessage(`{"n":1152921504606846977}`) },
		"raw inexact fraction":   func(r *Request) { r.Tools[0].Parameters = json.RawMessage(`{"min":0.30000000000000000001}`) },
		"option namespaced":      func(r *Request) { r.Options["vendor.anthropic.x"] = 1 },
		"option empty name":      func(r *Request) { r.Options[""] = 1 },
		"option named seed":      func(r *Request) { r.Options["seed"] = 8 },
		"option named topP":      func(r *Request) { r.Options["topP"] = 0.5 },
		"option named stop":      func(r *Request) { r.Options["stop"] = []string{"x"} },
		"option named messages":  func(r *Request) { r.Options["messages"] = []any{} },
		"option twice":           func(r *Request) { r.ProviderOptions["vendor.anthropic.reasoningEffort"] = "high" },
		"providerOptions bare":   func(r *Request) { r.ProviderOptions["topK"] = 1 },
		"providerOptions no opt": func(r *Request) { r.ProviderOptions["vendor.anthropic."] = 1 },
		"providerOptions no ns":  func(r *Request) { r.ProviderOptions["vendor..x"] = 1 },
		"field shadows role":     func(r *Request) { r.Messages[0].Fields = map[string]any{"role": "user"} },
		"field shadows params":   func(r *Request) { r.Tools[0].Fields = map[string]any{"parameters": 1} },
	}
	for name, change := range cases {
		r := baseSemantic()
		change(&r)
		if d, err := DigestV2(r); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %q, %v; want ErrInvalid", name, d, err)
		}
	}
	wire := map[string]string{
		"duplicate member":         `{"provider":"a","model":"m","seed":1,"seed":2}`,
		"duplicate escaped member": `{"provider":"a","model":"m","seed":1,"s\u0065ed":2}`,
		"duplicate message member": `{"provider":"a","model":"m","messages":[{"role":"user","content":"x","content":"y"}]}`,
		"lone surrogate":           `{"provider":"a","model":"m","messages":[{"role":"user","content":"\udc00"}]}`,
		"invalid UTF-8":            "{\"provider\":\"a\",\"model\":\"m\",\"x\":\"\xff\"}",
		"not an object":            `["provider"]`,
		"null":                     `null`,
		"seed fraction":            `{"provider":"a","model":"m","seed":1.5}`,
		"seed beyond 2^53 on wire": `{"provider":"a","model":"m","seed":9007199254740993}`,
		"bound as exponent":        `{"provider":"a","model":"m","maxOutputTokens":1e300}`,
		"unsafe integer member":    `{"provider":"a","model":"m","userId":1152921504606846977}`,
		"seed string":              `{"provider":"a","model":"m","seed":"1"}`,
		"stop not list":            `{"provider":"a","model":"m","stop":"END"}`,
		"null stop sequence":       `{"provider":"a","model":"m","stop":["END",null]}`,
		"null provider":            `{"provider":null,"model":"m"}`,
		"null messages":            `{"provider":"a","model":"m","messages":null}`,
		"message not object":       `{"provider":"a","model":"m","messages":["hi"]}`,
		"tool not object":          `{"provider":"a","model":"m","tools":[1]}`,
		"number overflow":          `{"provider":"a","model":"m","temperature":1e999}`,
	}
	for name, s := range wire {
		var r Request
		if err := json.Unmarshal([]byte(s), &r); !errors.Is(err, ErrInvalid) {
			t.Errorf("wire %s: %v; want ErrInvalid", name, err)
		}
	}
}

// TestSemanticConcurrent: the digest is a pure function; concurrent callers
// sharing one request agree (run with -race).
func TestSemanticConcurrent(t *testing.T) {
	r := baseSemantic()
	want := mustSemanticDigest(t, r)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if d, err := DigestV2(r); err != nil || d != want {
					t.Errorf("concurrent digest %s, %v", d, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestSemanticTransportOnlyMembers: the replay chapter's LLM cache-key
// recipe names the transport-only fields that MUST NOT influence the
// digest (timeout, trace context, request and correlation ids, retry
// counters, credential handles, tenant id, run id, host metadata, and
// stream, metadata and user), and its portability probe sends exactly the
// polluted request below: it must hash as the clean one, in the wire form
// and in the Go form (RED_TEAM 465).
func TestSemanticTransportOnlyMembers(t *testing.T) {
	const clean = `{"provider":"openai","model":"gpt-4","messages":[{"role":"user","content":"security-boundary probe"}],"temperature":0.5}`
	const polluted = `{"provider":"openai","model":"gpt-4","messages":[{"role":"user","content":"security-boundary probe"}],"temperature":0.5,
		"stream":true,"metadata":{"tenantId":"tenant-A","traceparent":"00-deadbeef-cafe-01"},"user":"user-42",
		"x-request-id":"req-abc-123","tenantId":"tenant-A","timeoutMs":30000,"runId":"run_123"}`
	digest := func(s string) string {
		t.Helper()
		var r Request
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		return mustSemanticDigest(t, r)
	}
	base := digest(clean)
	if got := digest(polluted); got != base {
		t.Errorf("the portability probe's transport-only members changed the digest")
	}
	withMember := func(m string) string { return strings.Replace(clean, `{"provider"`, `{`+m+`,"provider"`, 1) }
	for _, m := range []string{`"requestId":"r-1"`, `"correlationId":"c-1"`, `"tracestate":"k=v"`, `"stream":false`, `"user":"u"`, `"metadata":{"user_id":"u"}`} {
		if digest(withMember(m)) != base {
			t.Errorf("transport member %s changed the digest", m)
		}
	}
	// The Go form drops the same names from Options, so both forms agree.
	goForm := Request{Provider: "openai", Model: "gpt-4", Messages: []Message{{Role: "user", Content: "security-boundary probe"}}, Temperature: semPtr(0.5),
		Options: map[string]any{"stream": true, "user": "user-42", "timeout": 30, "traceId": "t", "runId": "run_123", "tenantId": "tenant-A"}}
	if mustSemanticDigest(t, goForm) != base {
		t.Error("transport-only Options changed the digest of the Go form")
	}
	// A semantic option next to them is still carried.
	if digest(withMember(`"reasoningEffort":"high"`)) == base {
		t.Error("a provider option was dropped")
	}
}

// TestSemanticNamedMembers: topK and safetySettings are members of the
// recipe's request object (the replay chapter's LLM cache-key recipe), so a
// request carrying them hashes as another host's does, not as a vendor
// option (RED_TEAM 466).
func TestSemanticNamedMembers(t *testing.T) {
	canon := func(s string) string {
		t.Helper()
		var r Request
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		c, err := CanonicalV2(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(c)
	}
	const want = `{"model":"claude-x","provider":"anthropic","recipe":"openwop-semantic-request-v2","request":{"messages":[{"content":"hello","role":"user"}],"safetySettings":{"harassment":"block"},"topK":40}}`
	for _, in := range []string{
		`{"provider":"anthropic","model":"claude-x","messages":[{"role":"user","content":"hello"}],"topK":40,"safetySettings":{"harassment":"block"}}`,
		`{"provider":"anthropic","model":"claude-x","messages":[{"role":"user","content":"hello"}],"topK":40.0,"safetySettings":{"harassment":"block"}}`,
	} {
		if got := canon(in); got != want {
			t.Errorf("%s\n got %s\nwant %s", in, got, want)
		}
	}
	goForm := Request{Provider: "anthropic", Model: "claude-x", Messages: []Message{{Role: "user", Content: "hello"}},
		TopK: semPtr[int64](40), Safety: map[string]any{"harassment": "block"}}
	if c, err := CanonicalV2(goForm); err != nil || string(c) != want {
		t.Errorf("Go form\n got %s, %v\nwant %s", c, err, want)
	}
	// A member the recipe does not name ("safety") is a provider option.
	if got, want := canon(`{"provider":"anthropic","model":"claude-x","messages":[],"safety":{}}`),
		`{"model":"claude-x","provider":"anthropic","providerOptions":{"vendor.anthropic.safety":{}},"recipe":"openwop-semantic-request-v2","request":{"messages":[]}}`; got != want {
		t.Errorf("safety member\n got %s\nwant %s", got, want)
	}
	// topK reaches the digest as a number, and is refused when it is not an
	// integer within ±(2^53-1).
	a, b := goForm, goForm
	b.TopK = semPtr[int64](41)
	if mustSemanticDigest(t, a) == mustSemanticDigest(t, b) {
		t.Error("topK did not change the digest")
	}
	b.TopK = semPtr[int64](1<<53 + 1)
	if _, err := DigestV2(b); !errors.Is(err, ErrInvalid) {
		t.Errorf("topK beyond 2^53: %v", err)
	}
	for name, s := range map[string]string{
		"topK fraction": `{"provider":"a","model":"m","topK":1.5}`,
		"topK string":   `{"provider":"a","model":"m","topK":"40"}`,
		"topK null":     `{"provider":"a","model":"m","topK":null}`,
	} {
		var r Request
		if err := json.Unmarshal([]byte(s), &r); !errors.Is(err, ErrInvalid) {
			t.Errorf("wire %s: %v; want ErrInvalid", name, err)
		}
	}
}
