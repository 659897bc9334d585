package workorder

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem/canon"
)

// TestMalformedBodyMessagesAreTheHosts: a work order body that is empty,
// cut short or not JSON/XML is refused with a *canon.ValidationError whose
// message says so in the host's words — never Go's decoder text ("EOF",
// "unexpected EOF", "invalid character").
func TestMalformedBodyMessagesAreTheHosts(t *testing.T) {
	for _, c := range []struct{ mt, body, want string }{
		{"application/json", "", "empty"},
		{"application/json", "   ", "empty"},
		{"application/json", "{", "ends before"},
		{"application/json", `{"work_order_number":`, "ends before"},
		{"application/json", `{"work_order_number":"WO-1","projects":[`, "ends before"},
		{"application/json", `{"work_order_number" "WO-1"}`, "not valid JSON"},
		{"application/json", `x`, "not valid JSON"},
		{"application/xml", "", "empty"},
		{"application/xml", "<work_order>", "ends before"},
	} {
		_, err := Decode(c.mt, []byte(c.body))
		var ve *canon.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s %q: %v, want a validation error", c.mt, c.body, err)
			continue
		}
		if strings.Contains(ve.Message, "EOF") || strings.Contains(ve.Message, "invalid character") || !strings.Contains(ve.Message, c.want) {
			t.Errorf("%s %q: %q, want it to say %q in the host's words", c.mt, c.body, ve.Message, c.want)
		}
	}
}

// TestQuantityAndTrailingDataMessagesSayWhatIsWrong: a refusal names the
// rule the body broke. A quantity of ten digits or more is written as
// digits, in the form JSON writes an integer, and is refused for its size
// (at most nine digits, docs/POLICIES.md): before, it was told to be
// "written as digits (no sign '+', leading zero, fraction or exponent)",
// which it was. Bytes after the work order's object that are no JSON
// value ("x", a stray "}") were "more than one JSON value" (RED_TEAM 482).
func TestQuantityAndTrailingDataMessagesSayWhatIsWrong(t *testing.T) {
	const ok = `{"work_order_number":"WO-1","projects":[{"code":"P-1","quantity":2}]}`
	q := func(n string) string {
		return `{"work_order_number":"WO-1","projects":[{"code":"P-1","quantity":` + n + `}]}`
	}
	qx := func(n string) string {
		return `<work_order><work_order_number>WO-1</work_order_number><projects><project><code>P-1</code><quantity>` + n + `</quantity></project></projects></work_order>`
	}
	for _, c := range []struct{ mt, body, want, not string }{
		{"application/json", q("1000000000"), "at most nine digits", "written as digits"},
		{"application/json", q("99999999999999999999999"), "at most nine digits", "written as digits"},
		{"application/json", q("-1000000000"), "at most nine digits", "written as digits"},
		{"application/xml", qx("1000000000"), "at most nine digits", "written as digits"},
		{"application/json", q("1.5"), "fraction or exponent", "nine digits"},
		{"application/json", q("1e3"), "fraction or exponent", "nine digits"},
		{"application/xml", qx("+2"), "sign", "nine digits"},
		{"application/json", ok + " x", "after the work order", "more than one"},
		{"application/json", ok + "}", "after the work order", "more than one"},
		{"application/json", ok + ok, "after the work order", ""},
	} {
		_, err := Decode(c.mt, []byte(c.body))
		var ve *canon.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s %q: %v, want a validation error", c.mt, c.body, err)
			continue
		}
		if !strings.Contains(ve.Message, c.want) || c.not != "" && strings.Contains(ve.Message, c.not) {
			t.Errorf("%s %q: %q, want it to say %q (and not %q)", c.mt, c.body, ve.Message, c.want, c.not)
		}
	}
	// Nine digits are a quantity.
	if v, err := Decode("application/json", []byte(q("999999999"))); err != nil || v.(WorkOrder).Projects[0].Quantity != 999999999 {
		t.Errorf("nine digits: %v %v", v, err)
	}
}

// TestUnknownMemberFieldIsAPointerToIt: details.field is a JSON Pointer
// (RFC 6901) to the member refused, so a member name holding "/" or "~"
// is escaped (~1, ~0). Before, the name was joined as it is: a member
// named "projects/0/code" was reported as the field /projects/0/code, a
// member of the contract the caller never got wrong (RED_TEAM 484).
func TestUnknownMemberFieldIsAPointerToIt(t *testing.T) {
	for body, want := range map[string]string{
		`{"projects/0/code":1}`: "/projects~10~1code",
		`{"a~b":1}`:             "/a~0b",
		`{"~1":1}`:              "/~01",
		`{"work_order_number":"WO-1","projects":[{"code":"P-1","quantity":2,"x/y":1}]}`:      "/projects/0/x~1y",
		`{"work_order_number":"WO-1","projects":[{"code":"P-1","quantity":2,"code":"P-2"}]}`: "/projects/0/code",
	} {
		_, err := Decode("application/json", []byte(body))
		var ve *canon.ValidationError
		if !errors.As(err, &ve) || ve.Field != want {
			t.Errorf("%s: %v, want a validation error naming %s", body, err, want)
		}
	}
}
