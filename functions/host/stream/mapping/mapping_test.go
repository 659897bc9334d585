package mapping

import (
	"testing"

	"github.com/idemkit/idemkit/functions/host/stream"
)

// TestFilter reads a mapping's patterns from a SAM template.
func TestFilter(t *testing.T) {
	tpl := []byte(`
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Events:
        Filtered:
          Type: DynamoDB
          Properties:
            FilterCriteria:
              Filters:
                - Pattern: '{"eventName": ["INSERT"]}'
        Unfiltered:
          Type: DynamoDB
          Properties: {}
        Intrinsic:
          Type: DynamoDB
          Properties:
            FilterCriteria:
              Filters:
                - Pattern: !Sub '{"eventName": ["${Name}"]}'
`)
	f, err := Filter(tpl, "Fn", "Filtered")
	if err != nil || f.Patterns() != 1 || !f.Match(stream.StreamRecord{EventName: "INSERT"}) || f.Match(stream.StreamRecord{EventName: "REMOVE"}) {
		t.Fatalf("Filtered: %+v, %v", f, err)
	}
	if f, err := Filter(tpl, "Fn", "Unfiltered"); err != nil || f.Patterns() != 0 {
		t.Fatalf("Unfiltered: %+v, %v", f, err)
	}
	for _, c := range [][2]string{{"Fn", "Intrinsic"}, {"Fn", "Missing"}, {"Other", "Filtered"}} {
		if _, err := Filter(tpl, c[0], c[1]); err == nil {
			t.Errorf("%s.%s: no error", c[0], c[1])
		}
	}
}

// TestRunsStream: the embedded template's executor mapping parses.
func TestRunsStream(t *testing.T) {
	f, err := RunsStream()
	if err != nil || f.Patterns() == 0 {
		t.Fatalf("RunsStream: %d patterns, %v", f.Patterns(), err)
	}
}
