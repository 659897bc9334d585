package workorder

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"mime"
	"sort"
	"strconv"
	"strings"

	"github.com/idemkit/idemkit/idem"
)

// Render renders a JSON response as XML when accept prefers XML
// (application/xml or text/xml ranked above application/json): objects
// become elements named after their members (in sorted order), arrays
// repeated <item> elements, scalars text; the root is <response>. Any other
// response, or a body that is not JSON, is returned unchanged: the stored
// response is the logical one and JSON is its default rendering.
func Render(resp *idem.Response, accept string) *idem.Response {
	if !prefersXML(accept) || !isJSON(resp.Headers["Content-Type"]) {
		return resp
	}
	dec := json.NewDecoder(bytes.NewReader(resp.Body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return resp
	}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	writeXML(&b, "response", v)
	out := &idem.Response{Status: resp.Status, Headers: make(map[string][]string, len(resp.Headers)), Body: b.Bytes()}
	for k, vs := range resp.Headers {
		out.Headers[k] = vs
	}
	out.Headers["Content-Type"] = []string{"application/xml"}
	return out
}

func isJSON(ct []string) bool {
	if len(ct) == 0 {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct[0])
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// prefersXML reports whether an Accept header ranks XML above JSON.
func prefersXML(accept string) bool {
	if accept == "" {
		return false
	}
	qJSON, qXML := -1.0, -1.0
	for _, r := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(r))
		if err != nil {
			continue
		}
		q := 1.0
		if s, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(s, 64); err == nil {
				q = f
			}
		}
		switch mt {
		case "application/json":
			qJSON = max(qJSON, q)
		case "application/xml", "text/xml":
			qXML = max(qXML, q)
		}
	}
	return qXML > 0 && qXML > qJSON
}

func writeXML(b *bytes.Buffer, name string, v any) {
	name = elementName(name)
	b.WriteString("<" + name + ">")
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			writeXML(b, k, v[k])
		}
	case []any:
		for _, e := range v {
			writeXML(b, "item", e)
		}
	case nil:
	case string:
		_ = xml.EscapeText(b, []byte(v))
	default:
		_ = xml.EscapeText(b, []byte(toString(v)))
	}
	b.WriteString("</" + name + ">")
}

func toString(v any) string {
	switch v := v.(type) {
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

// elementName makes a JSON member name a valid XML element name: letters,
// digits, '_', '-' and '.' kept, anything else '_', and a leading '_' when
// it does not start with a letter or '_'.
func elementName(s string) string {
	var b strings.Builder
	for i, r := range s {
		ok := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && (r == '-' || r == '.' || r >= '0' && r <= '9')
		if !ok {
			if i == 0 && (r == '-' || r == '.' || r >= '0' && r <= '9') {
				b.WriteByte('_')
				b.WriteRune(r)
				continue
			}
			r = '_'
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}
