package apifn

import (
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// TestValidationMessagesNameTheFieldOnce: a 400 validation_error of the
// poll, fork and cancel parameters names its field in details.field and
// once in the message, which a person reads ("timeout must be ...", never
// "timeout: timeout must be ...").
func TestValidationMessagesNameTheFieldOnce(t *testing.T) {
	f := newFixture(t)
	r := f.newRun(t, "acme")
	base := "/runs/" + runs.ProjectID(r.ID)
	cases := []struct {
		name  string
		do    func() (int, map[string]any)
		field string
	}{
		{"poll afterSequence", func() (int, map[string]any) {
			resp, m := f.do(t, eventsReq(base+"/events/poll", "acme", "afterSequence=x", ""))
			return resp.StatusCode, m
		}, "afterSequence"},
		{"poll timeout", func() (int, map[string]any) {
			resp, m := f.do(t, eventsReq(base+"/events/poll", "acme", "timeout=0", ""))
			return resp.StatusCode, m
		}, "timeout"},
		{"fork mode", func() (int, map[string]any) {
			resp, m := f.do(t, ev("POST", base+":fork", "acme", "", `{}`))
			return resp.StatusCode, m
		}, "mode"},
		{"fork unknown member", func() (int, map[string]any) {
			resp, m := f.do(t, ev("POST", base+":fork", "acme", "", `{"mode":"replay","nope":1}`))
			return resp.StatusCode, m
		}, "nope"},
		{"cancel reason", func() (int, map[string]any) {
			resp, m := f.do(t, ev("POST", base+"/cancel", "acme", "", `{"reason":1}`))
			return resp.StatusCode, m
		}, "reason"},
	}
	for _, c := range cases {
		st, m := c.do()
		d, _ := m["details"].(map[string]any)
		msg, _ := m["message"].(string)
		if st != 400 || m["error"] != "validation_error" || d["field"] != c.field {
			t.Fatalf("%s: %d %v", c.name, st, m)
		}
		if n := strings.Count(msg, c.field); n != 1 || strings.HasPrefix(msg, c.field+": ") {
			t.Errorf("%s: message %q names %s %d times", c.name, msg, c.field, n)
		}
	}
}
