package idemkit_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/idemkit/idemkit"
)

// TestAuditorIdempotencyStreamIsFiltered: the auditor acts on MODIFY and
// REMOVE records of the idempotency table only (reclaims, TTL-expired
// pending records, cross-region key conflicts), never on an INSERT, which
// every keyed request's claim makes. Its stream mapping filters INSERTs
// out, so a request does not also pay an auditor invocation: the filter
// admits exactly the event names the auditor reads.
func TestAuditorIdempotencyStreamIsFiltered(t *testing.T) {
	tp := parseTemplate(t, idemkit.Template)
	ev := get(get(get(get(tp.resources["AuditorFunction"], "Properties"), "Events"), "IdempotencyStream"), "Properties")
	filters := sequence(get(get(ev, "FilterCriteria"), "Filters"))
	if len(filters) != 1 {
		t.Fatalf("IdempotencyStream: %d filters, want 1", len(filters))
	}
	// Keys match exactly (Lambda's filter does; a struct field would also
	// take "EventName", a key Lambda finds in no record).
	var pattern map[string][]string
	if err := json.Unmarshal([]byte(get(filters[0], "Pattern").Value), &pattern); err != nil {
		t.Fatal(err)
	}
	names := pattern["eventName"]
	slices.Sort(names)
	if len(pattern) != 1 || !slices.Equal(names, []string{"MODIFY", "REMOVE"}) {
		t.Fatalf("the filter is %v, want exactly eventName [MODIFY REMOVE]", pattern)
	}
}
