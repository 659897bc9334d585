package semantic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/idemkit/idemkit/internal/jcs"
)

// RecipeV2 is the semantic request digest recipe (semantic request digest v2), and
// the semanticRequestRecipe stamp a run records (recipe stamps). It is also the value of
// the "recipe" member of the hashed object.
const RecipeV2 = "openwop-semantic-request-v2"

// ErrInvalid is matched (errors.Is) by every error of
// DigestV2, CanonicalV2 and Request.UnmarshalJSON: a
// missing or invalid field, an option that cannot be namespaced, a value that
// is not I-JSON (duplicate member names, lone surrogates, invalid UTF-8,
// non-finite or unsafe numbers). A request is rejected rather than hashed
// with part of it dropped or altered.
var ErrInvalid = errors.New("semantic: invalid request")

// maxSafeInteger is 2^53-1: JCS writes every number as an IEEE 754 double,
// so larger integers (seeds, bounds) would collide with their neighbours.
const maxSafeInteger = 1<<53 - 1

// Request is the complete semantic provider request after policy
// resolution (semantic request digest v2): every input that can change what the provider
// answers. Its digest (DigestV2) is the Layer-2 replay cache key: two
// requests share a digest exactly when their v2 objects are equal, byte for
// byte under RFC 8785.
//
// The v2 object is
//
//	{"recipe":"openwop-semantic-request-v2","provider":P,"model":M,
//	 "request":{"messages":[...],"tools":[...],"toolChoice":...,
//	            "responseFormat":...,"temperature":T,"topP":P,"topK":K,
//	            "maxOutputTokens":N,"stop":[...],"seed":S,
//	            "safetySettings":...},
//	 "providerOptions":{"vendor.<provider>.<option>":...}}
//
// with absent (nil) members omitted, and empty Tools, Stop and provider
// options omitted too (an empty list and no list are the same request).
// Messages are always present and never reordered; tools are sorted by name
// in UTF-16 code-unit order (their order is not semantic). No Unicode
// normalisation is applied anywhere.
//
// Transport-only settings (timeout, trace context, request and correlation
// ids, retry counts, credential handles, tenant and run ids, stream,
// metadata, user; the list on transportOnly) have no field: they are not
// part of the request's meaning and must not reach the digest. Options
// under those names are dropped, as the wire reader drops the members.
// Raw credentials must never be put in any field.
//
// Values typed any (content, schemas, option values) may be Go values
// (encoded with encoding/json) or json.RawMessage (kept exactly, then
// canonicalised).
type Request struct {
	// Provider identifies the provider ("anthropic"): the canonical
	// provider id, in lower-case printable ASCII (no upper-case letter, space
	// or control character), so one provider has one spelling. Required. It
	// is also the namespace of Options.
	Provider string
	// Model is the provider's model identifier. Required.
	Model string
	// Messages in conversation order, never reordered. Nil is hashed as [].
	Messages []Message
	// Tools offered to the model; hashed sorted by Name (UTF-16 code
	// units). Names must be unique. Nil or empty: omitted.
	Tools []Tool
	// ToolChoice is the tool-choice setting (any JSON value). Nil: omitted.
	ToolChoice any
	// ResponseFormat is the response schema/format (any JSON value). Nil:
	// omitted.
	ResponseFormat any
	// Temperature and TopP are the sampling settings. Nil: omitted. They
	// must be finite.
	Temperature, TopP *float64
	// TopK is the top-k sampling setting, a member of the recipe's request
	// object (not a vendor option). Nil: omitted. Must be within
	// ±(2^53-1).
	TopK *int64
	// MaxOutputTokens is the maximum output bound. Nil: omitted. Must be
	// within ±(2^53-1).
	MaxOutputTokens *int64
	// Stop lists the stop sequences, in order. Nil or empty: omitted.
	Stop []string
	// Seed is the sampling seed. Nil: omitted. Must be within ±(2^53-1).
	Seed *int64
	// Safety holds safety/policy settings that can alter output (any JSON
	// value), hashed as the recipe's "safetySettings" member. Nil: omitted.
	Safety any
	// Options are provider-specific outcome-affecting options under their
	// bare names ("reasoningEffort"); each is hashed in providerOptions as
	// "vendor.<Provider>.<name>". A name must be non-empty and must not
	// start with "vendor." (put namespaced names in ProviderOptions) nor be
	// a member of the request ("seed", "stop", "topK", "messages", ...: use
	// the field). A transport-only name ("timeout", "stream", "user", ...)
	// is dropped.
	Options map[string]any
	// ProviderOptions are options already namespaced as
	// "vendor.<provider>.<option>" (non-empty provider and option
	// segments), hashed as given. A key that Options also produces is an
	// error.
	ProviderOptions map[string]any
}

// Message is one message of the conversation.
type Message struct {
	// Role is the author ("system", "user", "assistant", "tool"). Required.
	Role string
	// Content is the message content: a string or a list of content parts
	// (any JSON value). Nil: omitted.
	Content any
	// Fields carries any further message members (name, tool call ids,
	// tool calls, cache hints ...) verbatim under their own names; it must
	// not repeat "role" or "content".
	Fields map[string]any
}

// Tool is one tool offered to the model.
type Tool struct {
	// Name is the tool name, the sort key. Required, unique in a request.
	Name string
	// Description is the tool description the model reads. Empty: omitted.
	Description string
	// Parameters is the tool's input schema (any JSON value). Nil: omitted.
	Parameters any
	// Fields carries any further tool members verbatim; it must not repeat
	// "name", "description" or "parameters".
	Fields map[string]any
}

// DigestV2 returns the semantic request digest v2 of r: SHA-256 over
// the RFC 8785 canonical form of the v2 object (see Request), as 64
// lower-case hex characters with no prefix, the form of the OpenWOP golden
// vectors. Stamp it with RecipeV2 wherever it is stored.
func DigestV2(r Request) (string, error) {
	canon, err := CanonicalV2(r)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// CanonicalV2 returns the exact bytes DigestV2 hashes: the
// RFC 8785 canonical form of r's v2 object. It is the preimage to diff when
// two hosts disagree on a digest.
func CanonicalV2(r Request) ([]byte, error) {
	obj, err := r.v2Object()
	if err != nil {
		return nil, err
	}
	// Exact: a number RFC 8785 would write with another value (an integer
	// beyond ±(2^53-1), a fraction no double holds) is refused, as the
	// typed seed and bound are, rather than hashed equal to its neighbours.
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, semanticErr("%w", err)
	}
	out, err := jcs.CanonicalizeExact(raw)
	if err != nil {
		return nil, semanticErr("%w", err)
	}
	return out, nil
}

func semanticErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// v2Object builds the v2 object of semantic request digest v2 from r, validating as it goes.
func (r Request) v2Object() (map[string]any, error) {
	if err := checkText("provider", r.Provider, true); err != nil {
		return nil, err
	}
	if err := checkProvider(r.Provider); err != nil {
		return nil, err
	}
	if err := checkText("model", r.Model, true); err != nil {
		return nil, err
	}
	req := map[string]any{}

	msgs := make([]any, 0, len(r.Messages))
	for i, m := range r.Messages {
		if err := checkText(fmt.Sprintf("messages[%d].role", i), m.Role, true); err != nil {
			return nil, err
		}
		o, err := withFields(fmt.Sprintf("messages[%d]", i), m.Fields, "role", "content")
		if err != nil {
			return nil, err
		}
		o["role"] = m.Role
		if m.Content != nil {
			if err := checkValue(fmt.Sprintf("messages[%d].content", i), m.Content); err != nil {
				return nil, err
			}
			o["content"] = m.Content
		}
		msgs = append(msgs, o)
	}
	req["messages"] = msgs

	if len(r.Tools) > 0 {
		tools := slices.Clone(r.Tools)
		slices.SortFunc(tools, func(a, b Tool) int { return jcs.CompareUTF16(a.Name, b.Name) })
		out := make([]any, 0, len(tools))
		for i, t := range tools {
			if err := checkText("tools.name", t.Name, true); err != nil {
				return nil, err
			}
			if i > 0 && tools[i-1].Name == t.Name {
				// Two tools of one name would sort by input order, and
				// tool order must not change the digest.
				return nil, semanticErr("tool name %q appears twice", t.Name)
			}
			o, err := withFields("tool "+t.Name, t.Fields, "name", "description", "parameters")
			if err != nil {
				return nil, err
			}
			o["name"] = t.Name
			if t.Description != "" {
				if err := checkText("tools.description", t.Description, false); err != nil {
					return nil, err
				}
				o["description"] = t.Description
			}
			if t.Parameters != nil {
				if err := checkValue("tool "+t.Name+" parameters", t.Parameters); err != nil {
					return nil, err
				}
				o["parameters"] = t.Parameters
			}
			out = append(out, o)
		}
		req["tools"] = out
	}

	for _, v := range []struct {
		name string
		val  any
	}{{"toolChoice", r.ToolChoice}, {"responseFormat", r.ResponseFormat}, {"safetySettings", r.Safety}} {
		if v.val == nil {
			continue
		}
		if err := checkValue(v.name, v.val); err != nil {
			return nil, err
		}
		req[v.name] = v.val
	}
	finite := func(name string, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return semanticErr("%s is not finite", name)
		}
		return nil
	}
	if err := putSet(req, finite, field[float64]{"temperature", r.Temperature}, field[float64]{"topP", r.TopP}); err != nil {
		return nil, err
	}
	safe := func(name string, v int64) error {
		if v > maxSafeInteger || v < -maxSafeInteger {
			return semanticErr("%s %d is outside ±(2^53-1) and would not survive JCS", name, v)
		}
		return nil
	}
	if err := putSet(req, safe, field[int64]{"topK", r.TopK}, field[int64]{"maxOutputTokens", r.MaxOutputTokens}, field[int64]{"seed", r.Seed}); err != nil {
		return nil, err
	}
	if len(r.Stop) > 0 {
		for _, s := range r.Stop {
			if err := checkText("stop", s, false); err != nil {
				return nil, err
			}
		}
		req["stop"] = r.Stop
	}

	obj := map[string]any{
		"recipe":   RecipeV2,
		"provider": r.Provider,
		"model":    r.Model,
		"request":  req,
	}
	opts, err := r.providerOptions()
	if err != nil {
		return nil, err
	}
	if len(opts) > 0 {
		obj["providerOptions"] = opts
	}
	return obj, nil
}

// providerOptions merges ProviderOptions and the namespaced Options.
func (r Request) providerOptions() (map[string]any, error) {
	opts := make(map[string]any, len(r.ProviderOptions)+len(r.Options))
	for k, v := range r.ProviderOptions {
		if err := checkText("providerOptions key", k, true); err != nil {
			return nil, err
		}
		rest, ok := strings.CutPrefix(k, "vendor.")
		if i := strings.IndexByte(rest, '.'); !ok || i <= 0 || i == len(rest)-1 {
			return nil, semanticErr("providerOptions key %q is not vendor.<provider>.<option>", k)
		}
		if err := checkValue("providerOptions "+k, v); err != nil {
			return nil, err
		}
		opts[k] = v
	}
	for k, v := range r.Options {
		if err := checkText("option name", k, true); err != nil {
			return nil, err
		}
		if transportOnly[k] {
			continue
		}
		if strings.HasPrefix(k, "vendor.") {
			return nil, semanticErr("option %q is already namespaced: put it in ProviderOptions", k)
		}
		if _, named := requestMembers[k]; named {
			// The wire form reads this name as the request member, so as
			// an option it would hash the same request another way.
			return nil, semanticErr("option %q is a member of the request: use its field", k)
		}
		nk := "vendor." + r.Provider + "." + k
		if _, dup := opts[nk]; dup {
			return nil, semanticErr("option %q given twice (Options and ProviderOptions %q)", k, nk)
		}
		if err := checkValue("option "+k, v); err != nil {
			return nil, err
		}
		opts[nk] = v
	}
	return opts, nil
}

// withFields copies extra members into a new object, refusing reserved names.
func withFields(where string, fields map[string]any, reserved ...string) (map[string]any, error) {
	o := make(map[string]any, len(fields)+len(reserved))
	for k, v := range fields {
		if slices.Contains(reserved, k) {
			return nil, semanticErr("%s: Fields must not set %q (use the field)", where, k)
		}
		if err := checkText(where+" field name", k, false); err != nil {
			return nil, err
		}
		if err := checkValue(where+"."+k, v); err != nil {
			return nil, err
		}
		o[k] = v
	}
	return o, nil
}

// checkProvider refuses a provider id that is not lower-case printable
// ASCII: "Anthropic", "anthropic " and "anthropic" name one provider, and the
// recipe's canonical id is the lower-case one; hashing the others would give
// the same request three digests.
func checkProvider(p string) error {
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c >= 0x7f || ('A' <= c && c <= 'Z') {
			return semanticErr("provider %q is not a canonical provider id (lower-case printable ASCII)", p)
		}
	}
	return nil
}

func checkText(what, s string, required bool) error {
	if required && s == "" {
		return semanticErr("%s is required", what)
	}
	if !utf8.ValidString(s) {
		return semanticErr("%s is not valid UTF-8", what)
	}
	return nil
}

// checkValue rejects what encoding/json would silently alter before JCS sees
// it: invalid UTF-8 in strings (it writes U+FFFD, so two different values
// would hash equal) and non-finite floats. It walks the dynamic JSON shapes
// (maps, slices, strings, json.RawMessage); other Go values are left to
// encoding/json and the canonicaliser.
func checkValue(what string, v any) error {
	switch x := v.(type) {
	case string:
		if !utf8.ValidString(x) {
			return semanticErr("%s: string is not valid UTF-8", what)
		}
	case []string:
		for _, s := range x {
			if err := checkValue(what, s); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := checkValue(what, e); err != nil {
				return err
			}
		}
	case map[string]any:
		for k, e := range x {
			if err := checkValue(what, k); err != nil {
				return err
			}
			if err := checkValue(what, e); err != nil {
				return err
			}
		}
	case map[string]string:
		for k, e := range x {
			if !utf8.ValidString(k) || !utf8.ValidString(e) {
				return semanticErr("%s: string is not valid UTF-8", what)
			}
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return semanticErr("%s: number is not finite", what)
		}
	case json.RawMessage:
		// Exact, as the whole object is (CanonicalV2): refused here, the
		// error names the member.
		if _, err := jcs.CanonicalizeExact(x); err != nil {
			return semanticErr("%s: %w", what, err)
		}
	}
	return nil
}

// transportOnly lists the top-level names that are transport-only (the
// LLM cache-key recipe: timeout, trace context, request and correlation
// ids, retry counters, credential handles, tenant id, run id, host metadata,
// and stream, metadata and user, which cannot alter the completion), read
// and ignored by UnmarshalJSON and dropped from Options: "timeout",
// "timeoutMs", "traceId", "traceparent", "tracestate", "requestId",
// "x-request-id", "correlationId", "retryCount", "maxRetries",
// "credentialHandle", "apiKey", "tenantId", "runId", "stream", "metadata",
// "user". Any other unknown member is carried as a provider option, never
// dropped.
var transportOnly = map[string]bool{
	"timeout": true, "timeoutMs": true,
	"traceId": true, "traceparent": true, "tracestate": true,
	"requestId": true, "x-request-id": true, "correlationId": true,
	"retryCount": true, "maxRetries": true,
	"credentialHandle": true, "apiKey": true,
	"tenantId": true, "runId": true,
	"stream": true, "metadata": true, "user": true,
}

// UnmarshalJSON reads the wire form used by the OpenWOP golden vectors:
//
//	{"provider":..., "model":..., "messages":[{"role":...,"content":...}],
//	 "tools":[{"name":...,"description":...,"parameters":...}],
//	 "toolChoice":..., "responseFormat":..., "temperature":..., "topP":...,
//	 "topK":..., "maxOutputTokens":..., "stop":[...], "seed":...,
//	 "safetySettings":..., "providerOptions":{"vendor.<provider>.<option>":...}}
//
// Members are matched by exact name. The input must be I-JSON: duplicate
// member names (which encoding/json would resolve silently), lone surrogates,
// invalid UTF-8 and numbers RFC 8785 would write with another value (an
// integer beyond ±(2^53-1), a fraction no double holds) are rejected. Transport-only members (see the list on
// transportOnly: timeout, traceparent, requestId, retryCount,
// credentialHandle, tenantId, runId, stream, metadata, user, ...)
// are ignored; every other unknown top-level member is kept in Options (and
// so hashed as "vendor.<provider>.<name>"); unknown message and tool members
// are kept in their Fields. Values are kept as json.RawMessage, exactly as
// sent. Errors match ErrInvalid.
func (r *Request) UnmarshalJSON(data []byte) error {
	if _, err := jcs.CanonicalizeExact(data); err != nil {
		return semanticErr("%w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return semanticErr("%w", err)
	}
	if top == nil {
		return semanticErr("request is not a JSON object")
	}
	var out Request
	for k, v := range top {
		decode, ok := requestMembers[k]
		switch {
		case ok:
			if err := decode(&out, v); err != nil {
				return semanticErr("member %q: %w", k, err)
			}
		case transportOnly[k]:
		default:
			if out.Options == nil {
				out.Options = map[string]any{}
			}
			out.Options[k] = v
		}
	}
	*r = out
	return nil
}

// field is an optional member of the v2 object: nil when not set.
type field[T any] struct {
	name string
	val  *T
}

// putSet puts each set field into req under its name, once check accepts
// its value.
func putSet[T any](req map[string]any, check func(name string, v T) error, fields ...field[T]) error {
	for _, f := range fields {
		if f.val == nil {
			continue
		}
		if err := check(f.name, *f.val); err != nil {
			return err
		}
		req[f.name] = *f.val
	}
	return nil
}

// strictDecode decodes v into a typed field, refusing null (encoding/json
// would silently leave the field at its zero value, or absent, which is not
// what was sent) and values of the wrong type.
func strictDecode(v json.RawMessage, dst any) error {
	if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return errors.New("null is not allowed")
	}
	return json.Unmarshal(v, dst)
}

// decodeInteger decodes an integer member by its value as JCS reads it (an
// IEEE 754 double), so 256, 256.0 and 2.56e2, which are one number on the
// wire and in the canonical form, are one integer; a value with a fraction
// or outside ±(2^53-1) is refused.
func decodeInteger(v json.RawMessage, dst **int64) error {
	var f float64
	if err := strictDecode(v, &f); err != nil {
		return err
	}
	if f != math.Trunc(f) || f > maxSafeInteger || f < -maxSafeInteger {
		return fmt.Errorf("%s is not an integer within ±(2^53-1)", v)
	}
	n := int64(f)
	*dst = &n
	return nil
}

// decodeStop decodes the stop list, refusing a null element: encoding/json
// would decode it as "", and a list holding null would hash as the list
// holding an empty stop sequence.
func decodeStop(r *Request, v json.RawMessage) error {
	var stop []*string
	if err := strictDecode(v, &stop); err != nil {
		return err
	}
	r.Stop = make([]string, len(stop))
	for i, s := range stop {
		if s == nil {
			return fmt.Errorf("stop %d is null", i)
		}
		r.Stop[i] = *s
	}
	return nil
}

func decodeMessages(v json.RawMessage, dst *[]Message) error {
	return decodeObjects(v, "message", dst, messageMembers, func(m *Message) *map[string]any { return &m.Fields })
}

func decodeTools(v json.RawMessage, dst *[]Tool) error {
	return decodeObjects(v, "tool", dst, toolMembers, func(t *Tool) *map[string]any { return &t.Fields })
}

// members decodes the named members of a T; the others go to its Fields.
type members[T any] map[string]func(item *T, v json.RawMessage) error

var requestMembers = members[Request]{
	"provider":        func(r *Request, v json.RawMessage) error { return strictDecode(v, &r.Provider) },
	"model":           func(r *Request, v json.RawMessage) error { return strictDecode(v, &r.Model) },
	"messages":        func(r *Request, v json.RawMessage) error { return decodeMessages(v, &r.Messages) },
	"tools":           func(r *Request, v json.RawMessage) error { return decodeTools(v, &r.Tools) },
	"toolChoice":      func(r *Request, v json.RawMessage) error { r.ToolChoice = v; return nil },
	"responseFormat":  func(r *Request, v json.RawMessage) error { r.ResponseFormat = v; return nil },
	"safetySettings":  func(r *Request, v json.RawMessage) error { r.Safety = v; return nil },
	"temperature":     func(r *Request, v json.RawMessage) error { return strictDecode(v, &r.Temperature) },
	"topP":            func(r *Request, v json.RawMessage) error { return strictDecode(v, &r.TopP) },
	"topK":            func(r *Request, v json.RawMessage) error { return decodeInteger(v, &r.TopK) },
	"maxOutputTokens": func(r *Request, v json.RawMessage) error { return decodeInteger(v, &r.MaxOutputTokens) },
	"seed":            func(r *Request, v json.RawMessage) error { return decodeInteger(v, &r.Seed) },
	"stop":            decodeStop,
	"providerOptions": func(r *Request, v json.RawMessage) error {
		var po map[string]json.RawMessage
		if err := strictDecode(v, &po); err != nil || po == nil {
			return err
		}
		r.ProviderOptions = make(map[string]any, len(po))
		for pk, pv := range po {
			r.ProviderOptions[pk] = pv
		}
		return nil
	},
}

var messageMembers = members[Message]{
	"role":    func(m *Message, v json.RawMessage) error { return strictDecode(v, &m.Role) },
	"content": func(m *Message, v json.RawMessage) error { m.Content = v; return nil },
}

var toolMembers = members[Tool]{
	"name":        func(t *Tool, v json.RawMessage) error { return strictDecode(v, &t.Name) },
	"description": func(t *Tool, v json.RawMessage) error { return strictDecode(v, &t.Description) },
	"parameters":  func(t *Tool, v json.RawMessage) error { t.Parameters = v; return nil },
}

// decodeObjects decodes v, a list of objects (not null), into *dst: each
// object into a T, member by member through named, the other members kept
// verbatim in the map fields returns; an error names the object (what and
// its index) and the member.
func decodeObjects[T any](v json.RawMessage, what string, dst *[]T, named members[T], fields func(*T) *map[string]any) error {
	var raw []map[string]json.RawMessage
	if err := strictDecode(v, &raw); err != nil {
		return err
	}
	items := make([]T, 0, len(raw))
	for i, m := range raw {
		if m == nil {
			return fmt.Errorf("%s %d is not an object", what, i)
		}
		var item T
		for k, fv := range m {
			decode, ok := named[k]
			if !ok {
				f := fields(&item)
				if *f == nil {
					*f = map[string]any{}
				}
				(*f)[k] = fv
				continue
			}
			if err := decode(&item, fv); err != nil {
				return fmt.Errorf("%s %d %s: %w", what, i, k, err)
			}
		}
		items = append(items, item)
	}
	*dst = items
	return nil
}
