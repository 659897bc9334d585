package idem_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// A body that is not I-JSON is 400 validation_error whose message says
// what is wrong with it, so a client can fix it: a member name twice in
// one object (the object named in the message, the member's JSON Pointer
// in details.field), a lone UTF-16 surrogate escape or bytes that are not UTF-8 in a
// string (the string's member in details.field), a byte order mark before
// the JSON; other malformed bodies keep the plain message. Nothing is
// claimed or cached, on every adapter.
func TestInvalidJSONSaysWhy(t *testing.T) {
	reg := registry(t)
	for _, c := range []struct{ name, body, field, says string }{
		{"duplicate member", `{"a":1,"a":2}`, "/a", `the top-level object has the member name "a" twice`},
		{"nested duplicate", `{"o":{"k":1, "k" : 1}}`, "/o/k", `the object "/o" has the member name "k" twice`},
		{"escaped duplicate", `[{"x":0,"\u0078":1}]`, "/0/x", `the object "/0" has the member name "x" twice`},
		{"lone surrogate", `{"s":"\ud800"}`, "/s", "lone UTF-16 surrogate"},
		{"invalid UTF-8", "{\"s\":\"\xff\"}", "/s", "not valid UTF-8"},
		{"byte order mark", "\xef\xbb\xbf{\"a\":1}", "", "byte order mark"},
		{"syntax", `{"a":`, "", "not valid JSON"},
	} {
		for _, a := range refundAdapters {
			t.Run(a.name+" "+c.name, func(t *testing.T) {
				e := refundEnv(t, nil)
				got := a.send(t, e, refundReq{id: "1", body: c.body})
				details := checkEnvelope(t, reg, got, 400, "validation_error")
				var env struct{ Message string }
				if err := json.Unmarshal([]byte(got.body), &env); err != nil || !strings.Contains(env.Message, c.says) {
					t.Fatalf("message %q (%v): want it to say %q", env.Message, err, c.says)
				}
				if c.field != "" && details["field"] != c.field {
					t.Fatalf("details %v: want field %q", details, c.field)
				}
				if n := e.store.TotalCalls(); n != 0 || a.Calls(e) != 0 {
					t.Fatalf("store calls %d, handler calls %d: want none", n, a.Calls(e))
				}
			})
		}
	}
}
