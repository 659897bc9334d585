package tables

import (
	"errors"
	"strings"
	"testing"
)

// TestParameterConstraints: a parameter's value is held to the template's
// constraints as CloudFormation holds it at deploy time: AllowedValues,
// AllowedPattern (matching the whole value), MinLength/MaxLength (String),
// MinValue/MaxValue and being a number (Number); for a CommaDelimitedList
// each element (AllowedValues, AllowedPattern), for a List<Number> each
// element being a number.
func TestParameterConstraints(t *testing.T) {
	tmpl := []byte(`
Parameters:
  Name:
    Type: String
    Default: abc
    MinLength: 3
    MaxLength: 5
    AllowedPattern: "[a-z]+"
  Count:
    Type: Number
    Default: 2
    MinValue: 1
    MaxValue: 2.5
  Regions:
    Type: CommaDelimitedList
    Default: "us-east-1"
    AllowedValues: [us-east-1, eu-west-1]
  Ports:
    Type: List<Number>
    Default: "80"
    MaxValue: 1000
Resources: {}
`)
	for _, c := range []struct {
		name, value, reason string // reason "" is accepted
	}{
		{"Name", "abc", ""}, {"Name", "abcde", ""},
		{"Name", "ab", "want at least 3 characters"},
		{"Name", "abcdef", "want at most 5 characters"},
		{"Name", "ab1", "want a value matching [a-z]+"},
		{"Name", "1abc", "want a value matching [a-z]+"},
		{"Count", "1", ""}, {"Count", "2.5", ""}, {"Count", "1e0", ""},
		{"Count", "0", "want a number from 1 to 2.5"},
		{"Count", "3", "want a number from 1 to 2.5"},
		{"Count", "two", "want a number from 1 to 2.5"},
		{"Count", "Inf", "want a number from 1 to 2.5"},
		{"Count", "0x2", "want a number from 1 to 2.5"},
		{"Regions", "us-east-1,eu-west-1", ""},
		{"Regions", "us-east-1,ap-south-1", "want one of us-east-1, eu-west-1"},
		{"Ports", "80,443", ""},
		{"Ports", "80,http", "want numbers, comma-separated"},
	} {
		_, err := DefsWithParameters(tmpl, "us-east-1", map[string]string{c.name: c.value})
		var pe *ParameterError
		switch {
		case c.reason == "" && err != nil:
			t.Errorf("%s=%s: %v, want it accepted", c.name, c.value, err)
		case c.reason != "" && (!errors.As(err, &pe) || !strings.HasPrefix(pe.Reason, c.reason) || pe.Name != c.name || pe.Value != c.value):
			t.Errorf("%s=%s: %v, want a ParameterError %q", c.name, c.value, err, c.reason)
		}
	}
}
