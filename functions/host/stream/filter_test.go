package stream

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// TestFilterMatch pins the evaluation of Lambda's filter rules on DynamoDB
// stream records: the event's shape (eventName, userIdentity, dynamodb.Keys
// / NewImage / OldImage in DynamoDB JSON), exists only on a leaf (the
// attribute's type member, as Lambda's documentation for DynamoDB
// requires), and the patterns ORed.
func TestFilterMatch(t *testing.T) {
	run := StreamRecord{EventName: "INSERT", Keys: map[string]types.AttributeValue{"pk": s("r1")},
		NewImage: map[string]types.AttributeValue{"pk": s("r1"), "status": s("pending"), "version": &types.AttributeValueMemberN{Value: "1"},
			"retries": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, "flag": &types.AttributeValueMemberBOOL{Value: true}}}
	scope := StreamRecord{EventName: "INSERT", Keys: map[string]types.AttributeValue{"pk": s("#scope/v1/x")},
		NewImage: map[string]types.AttributeValue{"pk": s("#scope/v1/x"), "holder": s("r1")}}
	modify := run
	modify.EventName, modify.OldImage = "MODIFY", run.NewImage
	ttl := StreamRecord{EventName: "REMOVE", Keys: run.Keys, OldImage: run.NewImage, PrincipalID: TTLPrincipal, IdentityType: "Service"}
	for _, c := range []struct {
		name     string
		patterns []string
		rec      StreamRecord
		want     bool
	}{
		{"no pattern: everything", nil, ttl, true},
		{"eventName", []string{`{"eventName": ["INSERT"]}`}, scope, true},
		{"eventName other", []string{`{"eventName": ["INSERT"]}`}, modify, false},
		{"exists on the leaf", []string{`{"dynamodb": {"NewImage": {"status": {"S": [{"exists": true}]}}}}`}, run, true},
		{"exists on the leaf, absent", []string{`{"dynamodb": {"NewImage": {"status": {"S": [{"exists": true}]}}}}`}, scope, false},
		{"exists on a non-leaf never holds", []string{`{"dynamodb": {"NewImage": {"status": [{"exists": true}]}}}`}, run, false},
		{"exists false, absent", []string{`{"dynamodb": {"NewImage": {"status": {"S": [{"exists": false}]}}}}`}, scope, true},
		{"exists false, present", []string{`{"dynamodb": {"NewImage": {"status": {"S": [{"exists": false}]}}}}`}, run, false},
		{"exists on an absent image", []string{`{"dynamodb": {"NewImage": {"pk": {"S": [{"exists": true}]}}}}`}, ttl, false},
		{"and of members", []string{`{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"status": {"S": [{"exists": true}]}}}}`}, modify, false},
		{"or of patterns", []string{`{"eventName": ["REMOVE"]}`, `{"dynamodb": {"Keys": {"pk": {"S": [{"prefix": "#"}]}}}}`}, scope, true},
		{"prefix", []string{`{"dynamodb": {"Keys": {"pk": {"S": [{"prefix": "#"}]}}}}`}, run, false},
		{"suffix", []string{`{"dynamodb": {"Keys": {"pk": {"S": [{"suffix": "1"}]}}}}`}, run, true},
		{"anything-but", []string{`{"dynamodb": {"NewImage": {"status": {"S": [{"anything-but": ["completed", "failed"]}]}}}}`}, run, true},
		{"anything-but, listed", []string{`{"dynamodb": {"NewImage": {"status": {"S": [{"anything-but": "pending"}]}}}}`}, run, false},
		{"anything-but, absent", []string{`{"dynamodb": {"NewImage": {"status": {"S": [{"anything-but": "x"}]}}}}`}, scope, false},
		{"equals-ignore-case", []string{`{"dynamodb": {"NewImage": {"status": {"S": [{"equals-ignore-case": "PENDING"}]}}}}`}, run, true},
		{"a number is a string in DynamoDB JSON", []string{`{"dynamodb": {"NewImage": {"version": {"N": ["1"]}}}}`}, run, true},
		{"a set matches by element", []string{`{"dynamodb": {"NewImage": {"retries": {"SS": ["b"]}}}}`}, run, true},
		{"a boolean", []string{`{"dynamodb": {"NewImage": {"flag": {"BOOL": [true]}}}}`}, run, true},
		{"userIdentity of a TTL deletion", []string{`{"userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]}}`}, ttl, true},
		{"userIdentity of a user's write", []string{`{"userIdentity": {"type": ["Service"]}}`}, run, false},
	} {
		f, err := ParseFilter(c.patterns...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := f.Match(c.rec); got != c.want {
			t.Errorf("%s: %v matched %s %v: %v, want %v", c.name, c.patterns, c.rec.EventName, c.rec.Keys, got, c.want)
		}
	}
}

// TestParseFilterRefuses: what Match does not evaluate is refused, never
// evaluated as something else.
func TestParseFilterRefuses(t *testing.T) {
	for _, p := range []string{
		``, `[]`, `{}`, `"INSERT"`,
		`{"eventName": "INSERT"}`,
		`{"eventName": []}`,
		`{"dynamodb": {}}`,
		`{"dynamodb": {"NewImage": {"n": {"N": [{"numeric": [">", 0]}]}}}}`,
		`{"$or": [{"eventName": ["INSERT"]}]}`,
		`{"eventName": [{"exists": "yes"}]}`,
		`{"eventName": [{"prefix": "I", "suffix": "T"}]}`,
		`{"eventName": [{"anything-but": {"prefix": "I"}}]}`,
		`{"eventName": [{"wildcard": "IN*"}]}`,
	} {
		if _, err := ParseFilter(p); !errors.Is(err, ErrBadPattern) {
			t.Errorf("ParseFilter(%q) = %v, want ErrBadPattern", p, err)
		}
	}
}
