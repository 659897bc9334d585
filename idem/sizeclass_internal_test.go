package idem

import (
	"testing"
	"unsafe"
)

// TestRequestSizeClass: every request is one allocation (the request and
// its transaction; none for a request Do takes from requestPool), and a
// first execution one more (execution). Go puts an object with pointers
// of more than 512 bytes in a size class with an 8-byte header; the
// request fits the 704-byte class with it (896 bytes before its flags
// were packed, the route's Contract kept instead of the whole Route and
// the lease's wall-clock end moved to the execution; 768 before the
// claim's store call context moved to claimNames), and the execution
// stays at 512 bytes or under, where no header is added. A field that
// pushes either into a larger class costs every request the difference
// in allocated bytes; this test names it.
func TestRequestSizeClass(t *testing.T) {
	const mallocHeader = 8
	if n := unsafe.Sizeof(request{}) + mallocHeader; n > 704 {
		t.Errorf("request: %d bytes with its allocation header, beyond the 704-byte size class", n)
	}
	if n := unsafe.Sizeof(execution{}); n > 512 {
		t.Errorf("execution: %d bytes, beyond 512 (it would take an allocation header and the next size class)", n)
	}
}

// TestClaimOutcomeKept: a transaction's later log lines carry the claim
// outcome it counted, for every claim outcome; before one is known, a
// line's outcome is the error outcome.
func TestClaimOutcomeKept(t *testing.T) {
	g := &Guard{hash: func(s string) string { return s }}
	for ix, o := range map[uint8]string{outcomeClaimed: OutcomeClaimed, outcomeReclaimed: OutcomeReclaimed, outcomeReplay: OutcomeReplay, outcomeInFlight: OutcomeInFlight, outcomeMismatch: OutcomeMismatch} {
		tx := &txn{g: g, in: &request{}}
		tx.claimOutcome(ix)
		var got string
		for _, a := range tx.attrs() {
			if a.Key == "outcome" {
				got = a.Value.String()
			}
		}
		if got != o {
			t.Errorf("claim outcome %d: a later log line's outcome is %q, want %q", ix, got, o)
		}
	}
	tx := &txn{g: g, in: &request{}}
	for _, a := range tx.attrs() {
		if a.Key == "outcome" && a.Value.String() != logOutcomeError {
			t.Errorf("outcome before the claim: %q, want %q", a.Value.String(), logOutcomeError)
		}
	}
}
