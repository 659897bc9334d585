package storeconfig

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/smithy-go"
)

func TestTableProblem(t *testing.T) {
	api := func(code, msg string) error {
		return fmt.Errorf("op: %w", &smithy.GenericAPIError{Code: code, Message: msg})
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{api("ResourceNotFoundException", "Requested resource not found"), true},
		{api("ValidationException", "The provided key element does not match the schema"), true},
		{api("ValidationException", "One or more parameter values were invalid: Missing the key id in the item"), true},
		{api("ValidationException", "One of the required keys was not given a value"), true},
		{api("ValidationException", "One or more parameter values were invalid: Type mismatch for key pk expected: N actual: S"), true},
		{api("ValidationException", "Item size has exceeded the maximum allowed size"), false},
		{api("ConditionalCheckFailedException", "The conditional request failed"), false},
		{api("ProvisionedThroughputExceededException", "slow down"), false},
		{errors.New("connection refused"), false},
		{nil, false},
	} {
		if got := TableProblem(c.err) != ""; got != c.want {
			t.Errorf("TableProblem(%v) = %q, want a problem: %v", c.err, TableProblem(c.err), c.want)
		}
	}
}
