package dynamostore

import (
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

	"github.com/idemkit/idemkit/ledger"
)

// The narrow update encodes attempt rows and outcomes by hand; they must be
// exactly what the item codec (attributevalue on the item struct) writes,
// or a record written by Replace would read back differently from one
// written by Create.
func TestNarrowEncodingMatchesCodec(t *testing.T) {
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 123e6, time.UTC)
	rows := []ledger.Attempt{
		{N: 1, State: ledger.AttemptClaimed, At: t0},
		{N: 2, State: ledger.AttemptEscaped, At: t0, Fired: true, FiredAt: t0.Add(time.Second), RunID: "acme/run-1", NodeID: "n", InvocationID: "inv"},
		{N: 3, State: ledger.AttemptReleased, At: t0, Operator: "ops@acme", Note: "checked with the provider"},
	}
	for _, a := range rows {
		r := &ledger.Record{Attempts: []ledger.Attempt{a}}
		want, err := attributevalue.Marshal(toItem(r).Attempts[0])
		if err != nil {
			t.Fatal(err)
		}
		if got := attemptAV(&a); !reflect.DeepEqual(got, want) {
			t.Errorf("attempt %d:\n got %#v\nwant %#v", a.N, got, want)
		}
	}
	outcomes := []ledger.Outcome{
		{OK: true, Value: []byte(`{"id":"ch_1"}`)},
		{OK: true, Streamed: true, BodyDigest: "e3b0", BodySize: 42},
		{OK: true, Dropped: true},
		{OK: false, Error: "card declined"},
	}
	for i, o := range outcomes {
		r := &ledger.Record{Outcome: &o}
		want, err := attributevalue.Marshal(toItem(r).Outcome)
		if err != nil {
			t.Fatal(err)
		}
		if got := outcomeAV(&o); !reflect.DeepEqual(got, want) {
			t.Errorf("outcome %d:\n got %#v\nwant %#v", i, got, want)
		}
	}
}
