package workorder_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/host/workorder"
	"github.com/idemkit/idemkit/idem/canon"
)

// decode decodes body as mediaType and fails the test on an error.
func decode(t *testing.T, mediaType, body string) workorder.WorkOrder {
	t.Helper()
	v, err := workorder.Decode(mediaType, []byte(body))
	if err != nil {
		t.Fatalf("Decode(%s, %q): %v", mediaType, body, err)
	}
	return v.(workorder.WorkOrder)
}

// hash is the canonical form idem hashes for a decoded work order.
func hash(t *testing.T, w workorder.WorkOrder) string {
	t.Helper()
	b, err := canon.Default(canon.Request{Request: w, ContractVersion: workorder.Version})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const (
	okJSON = `{"work_order_number":"WO-1","projects":[{"code":"P-1","name":"Pump","quantity":2}]}`
	okXML  = `<work_order><work_order_number>WO-1</work_order_number><projects><project><code>P-1</code><name>Pump</name><quantity>2</quantity></project></projects></work_order>`
)

// TestDecodeRefusesWhatTheContractDoesNotDefine: everything the work-order
// contract does not define is refused as a validation error (400
// validation_error on the route), in JSON and XML alike, never read past or
// decoded lossily, so two different work orders can never decode to one.
func TestDecodeRefusesWhatTheContractDoesNotDefine(t *testing.T) {
	if _, err := workorder.Decode("application/json", []byte(okJSON)); err != nil {
		t.Fatalf("the valid JSON work order is refused: %v", err)
	}
	if _, err := workorder.Decode("application/xml", []byte(okXML)); err != nil {
		t.Fatalf("the valid XML work order is refused: %v", err)
	}
	j := func(number, project string) string {
		return `{"work_order_number":"` + number + `","projects":[` + project + `]}`
	}
	x := func(number, project string) string {
		return `<work_order><work_order_number>` + number + `</work_order_number><projects>` + project + `</projects></work_order>`
	}
	const p = `{"code":"P-1","name":"Pump","quantity":2}`
	const px = `<project><code>P-1</code><name>Pump</name><quantity>2</quantity></project>`
	for name, c := range map[string]struct{ mt, body string }{
		"JSON invalid UTF-8 in a value":       {"application/json", j("WO-\xff", p)},
		"JSON invalid UTF-8 in a name":        {"application/json", `{"work_order_number":"WO-1","pro\xfejects":[` + p + `]}`},
		"JSON Latin-1 bytes":                  {"application/json", j("Caf\xe9", p)},
		"JSON lone high surrogate escape":     {"application/json", j(`WO-\ud800`, p)},
		"JSON lone low surrogate escape":      {"application/json", j(`WO-\udfff`, p)},
		"JSON high surrogate then non-low":    {"application/json", j(`WO-\ud800\u0041`, p)},
		"JSON unknown member":                 {"application/json", `{"work_order_number":"WO-1","extra":1,"projects":[` + p + `]}`},
		"JSON unknown project member":         {"application/json", j("WO-1", `{"code":"P-1","quantity":2,"colour":"red"}`)},
		"JSON member name in another case":    {"application/json", `{"Work_Order_Number":"WO-1","projects":[` + p + `]}`},
		"JSON project member in another case": {"application/json", j("WO-1", `{"CODE":"P-1","quantity":2}`)},
		"JSON member name with Kelvin sign":   {"application/json", j("WO-1", `{"code":"P-1","name":"x","quantity":2,"\u212aey":1}`)},
		"JSON duplicate member":               {"application/json", `{"work_order_number":"WO-1","work_order_number":"WO-2","projects":[` + p + `]}`},
		"JSON duplicate project member":       {"application/json", j("WO-1", `{"code":"P-1","code":"P-2","quantity":2}`)},
		"JSON null value":                     {"application/json", j("WO-1", `{"code":"P-1","name":null,"quantity":2}`)},
		"JSON null projects":                  {"application/json", `{"work_order_number":"WO-1","projects":null}`},
		"JSON number where a string is":       {"application/json", `{"work_order_number":1,"projects":[` + p + `]}`},
		"JSON fractional quantity":            {"application/json", j("WO-1", `{"code":"P-1","quantity":2.0}`)},
		"JSON exponent quantity":              {"application/json", j("WO-1", `{"code":"P-1","quantity":2e0}`)},
		"JSON two values":                     {"application/json", okJSON + okJSON},
		"JSON byte-order mark":                {"application/json", "\xef\xbb\xbf" + okJSON},
		"JSON top-level array":                {"application/json", `[` + okJSON + `]`},
		"XML invalid UTF-8":                   {"application/xml", x("WO-\xff", px)},
		"XML Latin-1 bytes":                   {"application/xml", x("Caf\xe9", px)},
		"XML declared Latin-1":                {"application/xml", `<?xml version="1.0" encoding="ISO-8859-1"?>` + x("WO-1", px)},
		"XML surrogate character reference":   {"application/xml", x("WO-&#xD800;", px)},
		"XML decimal surrogate reference":     {"application/xml", x("WO-&#57343;", px)},
		"XML unknown element":                 {"application/xml", `<work_order><work_order_number>WO-1</work_order_number><extra>1</extra><projects>` + px + `</projects></work_order>`},
		"XML unknown project element":         {"application/xml", x("WO-1", `<project><code>P-1</code><quantity>2</quantity><colour>red</colour></project>`)},
		"XML unknown element in projects":     {"application/xml", x("WO-1", px+`<other/>`)},
		"XML element name in another case":    {"application/xml", `<work_order><Work_Order_Number>WO-1</Work_Order_Number><projects>` + px + `</projects></work_order>`},
		"XML attribute":                       {"application/xml", `<work_order priority="high"><work_order_number>WO-1</work_order_number><projects>` + px + `</projects></work_order>`},
		"XML attribute on a scalar":           {"application/xml", x(`WO-1`, `<project><code unit="x">P-1</code><quantity>2</quantity></project>`)},
		"XML root in a foreign namespace":     {"application/xml", `<work_order xmlns="urn:other"><work_order_number>WO-1</work_order_number><projects>` + px + `</projects></work_order>`},
		"XML prefixed root":                   {"application/xml", `<o:work_order xmlns:o="urn:other"><work_order_number>WO-1</work_order_number><projects>` + px + `</projects></o:work_order>`},
		"XML prefixed child":                  {"application/xml", `<work_order><o:work_order_number>WO-1</o:work_order_number><projects>` + px + `</projects></work_order>`},
		"XML another root":                    {"application/xml", `<order><work_order_number>WO-1</work_order_number><projects>` + px + `</projects></order>`},
		"XML element inside a scalar":         {"application/xml", x(`WO-<b>1</b>`, px)},
		"XML element inside a code":           {"application/xml", x(`WO-1`, `<project><code>P<i/>-1</code><quantity>2</quantity></project>`)},
		"XML text inside a container":         {"application/xml", `<work_order>junk<work_order_number>WO-1</work_order_number><projects>` + px + `</projects></work_order>`},
		"XML duplicate element":               {"application/xml", `<work_order><work_order_number>WO-1</work_order_number><work_order_number>WO-2</work_order_number><projects>` + px + `</projects></work_order>`},
		"XML duplicate projects element":      {"application/xml", `<work_order><work_order_number>WO-1</work_order_number><projects>` + px + `</projects><projects>` + px + `</projects></work_order>`},
		"XML duplicate project element":       {"application/xml", x("WO-1", `<project><code>P-1</code><code>P-2</code><quantity>2</quantity></project>`)},
		"XML a second root":                   {"application/xml", okXML + okXML},
		"XML text after the root":             {"application/xml", okXML + "x"},
		"XML comment":                         {"application/xml", x("WO<!-- -->-1", px)},
		"XML processing instruction":          {"application/xml", x("WO-1", px) + `<?pi x?>`},
		"XML document type":                   {"application/xml", `<!DOCTYPE work_order>` + okXML},
		"XML byte-order mark":                 {"application/xml", "\xef\xbb\xbf" + okXML},
		"XML signed quantity":                 {"application/xml", x("WO-1", `<project><code>P-1</code><quantity>+2</quantity></project>`)},
		"XML quantity with a leading zero":    {"application/xml", x("WO-1", `<project><code>P-1</code><quantity>02</quantity></project>`)},
		"XML empty quantity":                  {"application/xml", x("WO-1", `<project><code>P-1</code><quantity/></project>`)},
	} {
		_, err := workorder.Decode(c.mt, []byte(c.body))
		var ve *canon.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: Decode = %v, want a *canon.ValidationError", name, err)
		}
	}
}

// TestDecodeNormalisesOnlyTheStatedRules: each equivalence the policy
// document states, and nothing else: surrounding ASCII white space (space,
// tab, CR, LF) is trimmed from every string; a project code is upper-cased
// by ASCII rules only; JSON escapes and XML character references, entity
// references and CDATA sections are the characters they stand for; member
// and element order and the white space between them do not count; an
// absent name is the empty name.
func TestDecodeNormalisesOnlyTheStatedRules(t *testing.T) {
	wo := func(number, code, name string, qty int) workorder.WorkOrder {
		return workorder.WorkOrder{Number: number, Projects: []workorder.Project{{Code: code, Name: name, Quantity: qty}}}
	}
	same := map[string]struct {
		mt, body string
		want     workorder.WorkOrder
	}{
		"JSON ASCII white space trimmed":    {"application/json", `{"work_order_number":" \t\r\nWO-1\n","projects":[{"code":" p-1 ","name":"\tPump ","quantity":2}]}`, wo("WO-1", "P-1", "Pump", 2)},
		"XML ASCII white space trimmed":     {"application/xml", "<work_order><work_order_number>\n WO-1\t</work_order_number><projects><project><code> p-1\r\n</code><name> Pump</name><quantity> 2 </quantity></project></projects></work_order>", wo("WO-1", "P-1", "Pump", 2)},
		"JSON escapes":                      {"application/json", `{"work_order_number":"\u0057O-1","projects":[{"code":"P\u002d1","name":"Pu\u006dp","quantity":2}]}`, wo("WO-1", "P-1", "Pump", 2)},
		"XML references and CDATA":          {"application/xml", `<work_order><work_order_number>&#87;O-1</work_order_number><projects><project><code><![CDATA[P-1]]></code><name>Pump &amp; co</name><quantity>2</quantity></project></projects></work_order>`, wo("WO-1", "P-1", "Pump & co", 2)},
		"JSON member order":                 {"application/json", `{"projects":[{"quantity":2,"name":"Pump","code":"P-1"}],"work_order_number":"WO-1"}`, wo("WO-1", "P-1", "Pump", 2)},
		"XML element order and indenting":   {"application/xml", "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<work_order>\n <projects>\n  <project><quantity>2</quantity><name>Pump</name><code>P-1</code></project>\n </projects>\n <work_order_number>WO-1</work_order_number>\n</work_order>\n", wo("WO-1", "P-1", "Pump", 2)},
		"absent name":                       {"application/json", `{"work_order_number":"WO-1","projects":[{"code":"P-1","quantity":2}]}`, wo("WO-1", "P-1", "", 2)},
		"XML absent name":                   {"application/xml", `<work_order><work_order_number>WO-1</work_order_number><projects><project><code>P-1</code><quantity>2</quantity></project></projects></work_order>`, wo("WO-1", "P-1", "", 2)},
		"non-ASCII letters keep their case": {"application/json", `{"work_order_number":"wo-ß","projects":[{"code":"ıd-é-ſku","name":"ä","quantity":2}]}`, wo("wo-ß", "ıD-é-ſKU", "ä", 2)},
		"inner and non-ASCII space kept":    {"application/json", `{"work_order_number":"WO 1","projects":[{"code":"\u00a0p-1\u3000","name":"a  b","quantity":2}]}`, wo("WO 1", "\u00a0P-1\u3000", "a  b", 2)},
		"XML CR LF read as LF":              {"application/xml", "<work_order><work_order_number>WO\r\n1</work_order_number><projects>" + `<project><code>P-1</code><quantity>2</quantity></project></projects></work_order>`, wo("WO\n1", "P-1", "", 2)},
		"charset-free text/xml":             {"text/xml", okXML, wo("WO-1", "P-1", "Pump", 2)},
		"no media type is JSON":             {"", okJSON, wo("WO-1", "P-1", "Pump", 2)},
	}
	for name, c := range same {
		if got := decode(t, c.mt, c.body); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", name, got, c.want)
		}
	}
	// What no rule states stays a difference.
	base := hash(t, decode(t, "application/json", `{"work_order_number":"WO-1","projects":[{"code":"ID","quantity":2}]}`))
	for name, body := range map[string]string{
		"dotless i":            `{"work_order_number":"WO-1","projects":[{"code":"ıd","quantity":2}]}`,
		"long s":               `{"work_order_number":"WO-1","projects":[{"code":"ſd","quantity":2}]}`,
		"Kelvin sign":          `{"work_order_number":"WO-1","projects":[{"code":"\u212ad","quantity":2}]}`,
		"NBSP around the code": `{"work_order_number":"WO-1","projects":[{"code":"\u00a0ID","quantity":2}]}`,
		"ideographic space":    `{"work_order_number":"WO-1","projects":[{"code":"ID\u3000","quantity":2}]}`,
		"number case":          `{"work_order_number":"wo-1","projects":[{"code":"ID","quantity":2}]}`,
		"a name":               `{"work_order_number":"WO-1","projects":[{"code":"ID","name":"x","quantity":2}]}`,
	} {
		if h := hash(t, decode(t, "application/json", body)); h == base {
			t.Errorf("%s: hashes equal to the plain work order", name)
		}
	}
}

// TestDecodeChecksBodiesAreUTF8OnlyAtTheContentType: the work-order
// contract's bodies are UTF-8: canon.MediaType refuses a Content-Type whose
// charset is another (ISO-8859-1 included: it is refused, not transcoded)
// or that cannot be parsed, and accepts utf-8 in any letter case.
func TestDecodeChecksBodiesAreUTF8OnlyAtTheContentType(t *testing.T) {
	for ct, want := range map[string]string{
		"":                                 "",
		"application/json":                 "application/json",
		"Application/JSON; charset=UTF-8":  "application/json",
		`application/xml; charset="utf-8"`: "application/xml",
		"text/xml;charset=utf-8":           "text/xml",
	} {
		if got, err := canon.MediaType(ct); err != nil || got != want {
			t.Errorf("MediaType(%q) = %q, %v; want %q", ct, got, err, want)
		}
	}
	for _, ct := range []string{
		"application/json; charset=iso-8859-1",
		"application/json; charset=latin1",
		"application/xml; charset=utf-16",
		"application/json; charset=utf8",
		"application/json; charset=iso-8859-1; charset=utf-8",
		"application/json; charset",
	} {
		_, err := canon.MediaType(ct)
		var ve *canon.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(ve.Error(), "charset") && !strings.Contains(ve.Error(), "Content-Type") {
			t.Errorf("MediaType(%q) = %v, want a validation error", ct, err)
		}
	}
	// The refusal speaks to the caller, not in the parser's words.
	for _, ct := range []string{"; charset=utf-8", "application/json; charset", "application/json; a=1; a=2"} {
		if _, err := canon.MediaType(ct); err == nil || strings.Contains(err.Error(), "mime:") {
			t.Errorf("MediaType(%q) = %v, want a message without the parser's", ct, err)
		}
	}
}

// TestJSONStringsXMLCannotCarryAreRefused: JSON and XML are two spellings
// of one work order, so a JSON string holding a character XML 1.0 cannot
// carry (a control character other than tab, CR and LF, U+FFFE, U+FFFF;
// as a \u escape, since JSON has no raw control character) is refused as
// the XML decoder refuses it, naming the member: before, such a JSON work
// order was processed, and its answer rendered in XML (the ERP policy's
// Accept: application/xml) named U+FFFD in its place, a work order number
// the caller never sent (RED_TEAM 358).
func TestJSONStringsXMLCannotCarryAreRefused(t *testing.T) {
	for _, esc := range []string{`\u0000`, `\u0001`, `\u0008`, `\u000b`, `\u000c`, `\u000e`, `\u001f`, `\ufffe`, `\uffff`} {
		for field, body := range map[string]string{
			"/work_order_number": `{"work_order_number":"WO-` + esc + `1","projects":[{"code":"P-1","name":"Pump","quantity":2}]}`,
			"/projects/0/code":   `{"work_order_number":"WO-1","projects":[{"code":"P-` + esc + `1","name":"Pump","quantity":2}]}`,
			"/projects/1/name":   `{"work_order_number":"WO-1","projects":[{"code":"P-1","quantity":2},{"code":"P-2","name":"Pu` + esc + `mp","quantity":2}]}`,
		} {
			_, err := workorder.Decode("application/json", []byte(body))
			var ve *canon.ValidationError
			if !errors.As(err, &ve) || ve.Field != field {
				t.Errorf("%s in %s: Decode = %v, want a validation error naming %s", esc, field, err, field)
			}
		}
	}
	// What XML carries stays accepted: tab, CR and LF inside a string, the
	// last character before the surrogates and the first after them, and a
	// character beyond the Basic Multilingual Plane.
	w := decode(t, "application/json", `{"work_order_number":"WO\t1\r\n2","projects":[{"code":"P-\ud7ff\ue000\ufffd","name":"\ud83d\ude00","quantity":2}]}`)
	if w.Number != "WO\t1\r\n2" || w.Projects[0].Code != "P-\ud7ff\ue000\ufffd" || w.Projects[0].Name != "😀" {
		t.Errorf("accepted work order decoded as %+v", w)
	}
}
