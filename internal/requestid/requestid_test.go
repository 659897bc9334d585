package requestid

import "testing"

// TestStampSetsOrAddsOnlyTheMember: the member is set where a JSON object
// has it (every other byte kept, white space included), added to an error
// envelope that lacks it, and nothing else is touched: a success body
// without the member, a body that is not a JSON object, another media
// type, a member already equal, an empty name, id or body.
func TestStampSetsOrAddsOnlyTheMember(t *testing.T) {
	const js = "application/json"
	for _, c := range []struct {
		name, member string
		status       int
		ct, body, id string
		want         string
		changed      bool
	}{
		{"set in place", "request_id", 201, js, `{"a":1, "request_id" : "old" ,"b":[1]}`, "r1", `{"a":1, "request_id" : "r1" ,"b":[1]}`, true},
		{"set in a 4xx", "request_id", 409, js, `{"error":"x","request_id":"old"}`, "r1", `{"error":"x","request_id":"r1"}`, true},
		{"added to an envelope", "request_id", 404, js, `{"error":"not_found","message":"m"}` + "\n", "r1", `{"error":"not_found","message":"m","request_id":"r1"}` + "\n", true},
		{"+json and parameters", "request_id", 400, "application/problem+json; charset=utf-8", `{"error":"e"}`, "r1", `{"error":"e","request_id":"r1"}`, true},
		{"id escaped", "request_id", 200, js, `{"request_id":""}`, `a"b`, `{"request_id":"a\"b"}`, true},
		{"already equal", "request_id", 200, js, `{"request_id":"r1"}`, "r1", `{"request_id":"r1"}`, false},
		{"success without the member", "request_id", 200, js, `{"a":1}`, "r1", `{"a":1}`, false},
		{"4xx that is no envelope", "request_id", 400, js, `{"message":"m"}`, "r1", `{"message":"m"}`, false},
		{"nested member only", "request_id", 200, js, `{"a":{"request_id":"old"}}`, "r1", `{"a":{"request_id":"old"}}`, false},
		{"array", "request_id", 400, js, `[{"error":"x"}]`, "r1", `[{"error":"x"}]`, false},
		{"not JSON", "request_id", 400, js, `error`, "r1", `error`, false},
		{"another media type", "request_id", 400, "text/plain", `{"error":"x"}`, "r1", `{"error":"x"}`, false},
		{"no content type", "request_id", 400, "", `{"error":"x"}`, "r1", `{"error":"x"}`, false},
		{"no member named", "", 400, js, `{"error":"x"}`, "r1", `{"error":"x"}`, false},
		{"no id", "request_id", 400, js, `{"error":"x"}`, "", `{"error":"x"}`, false},
		{"no body", "request_id", 400, js, ``, "r1", ``, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := []byte(c.body)
			got, changed := Stamp(c.member, c.status, c.ct, in, c.id)
			if string(got) != c.want || changed != c.changed {
				t.Fatalf("Stamp = %s, %v; want %s, %v", got, changed, c.want, c.changed)
			}
			if string(in) != c.body {
				t.Fatalf("the body given was modified: %s", in)
			}
		})
	}
}
