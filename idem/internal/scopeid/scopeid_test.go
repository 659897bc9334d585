package scopeid

import (
	"bytes"
	"testing"
)

// AppendMethod's record ID is Append's of the operation method + " " +
// operation, and Append's own when the method is "".
func TestAppendMethodIsAppendOfTheJoinedOperation(t *testing.T) {
	for _, c := range []struct{ method, op string }{
		{"PUT", "ANY /orders/{orderId}/refunds/{refundId}"},
		{"DELETE", "$default"},
		{"PATCH", "/runs"},
	} {
		got := AppendMethod(nil, "t:", "acme", c.method, c.op, "k1")
		if want := Append(nil, "t:", "acme", c.method+" "+c.op, "k1"); !bytes.Equal(got, want) {
			t.Errorf("%s %s: %s, want %s", c.method, c.op, got, want)
		}
		if got, want := AppendMethod(nil, "t:", "acme", "", c.op, "k1"), Append(nil, "t:", "acme", c.op, "k1"); !bytes.Equal(got, want) {
			t.Errorf("%s: without a method %s, want %s", c.op, got, want)
		}
	}
}
