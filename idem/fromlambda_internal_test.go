package idem

import (
	"reflect"
	"testing"
)

// TestFromLambdaHeaderStorage: the one-value headers share the request's
// value storage while it lasts and the heap after it; every header keeps
// its own value(s), a name given in both spellings keeps both values, a
// name in both maps has both lists merged as API Gateway merges them (a
// value given in both once: "If the same key-value pair is specified in
// both, only the values from multiValueHeaders will appear"), and
// appending to one header's values never changes another's.
func TestFromLambdaHeaderStorage(t *testing.T) {
	var in request
	single := map[string]string{
		"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6",
		"x-dup": "lower", "X-Dup": "upper", "x-multi": "single", "x-both": "m1",
	}
	multi := map[string][]string{"x-multi": {"m1", "m2"}, "x-both": {"m1", "m2"}}
	r, err := fromLambda(&in.handled, in.handledVals[:0], 201, single, multi, "body", false)
	if err != nil {
		t.Fatal(err)
	}
	if r != &in.handled || r.Status != 201 || string(r.Body) != "body" {
		t.Fatalf("response %+v", r)
	}
	for k, v := range map[string]string{"A": "1", "B": "2", "C": "3", "D": "4", "E": "5", "F": "6"} {
		if got := r.Headers[k]; !reflect.DeepEqual(got, []string{v}) {
			t.Errorf("%s: %q, want [%q]", k, got, v)
		}
	}
	if got := r.Headers["X-Multi"]; !reflect.DeepEqual(got, []string{"m1", "m2", "single"}) {
		t.Errorf("X-Multi: %q, want the multi-value list and the one-value header's value", got)
	}
	if got := r.Headers["X-Both"]; !reflect.DeepEqual(got, []string{"m1", "m2"}) {
		t.Errorf("X-Both: %q, want the value given in both maps once", got)
	}
	if got := r.Headers["X-Dup"]; len(got) != 2 || (got[0] != "lower" && got[0] != "upper") || got[0] == got[1] {
		t.Errorf("X-Dup: %q, want both spellings' values", got)
	}
	before := map[string][]string{}
	for k, v := range r.Headers {
		before[k] = append([]string(nil), v...)
	}
	for k := range r.Headers {
		r.Headers[k] = append(r.Headers[k], "appended-"+k)
	}
	for k, v := range r.Headers {
		want := append(append([]string(nil), before[k]...), "appended-"+k)
		if !reflect.DeepEqual(v, want) {
			t.Errorf("%s after appending to every header: %q, want %q", k, v, want)
		}
	}
}
