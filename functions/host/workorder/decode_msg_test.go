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
