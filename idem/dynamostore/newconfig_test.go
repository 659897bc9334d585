package dynamostore_test

import (
	"errors"
	"testing"

	"github.com/idemkit/idemkit/idem/dynamostore"
)

// New with neither a Client nor a Table reports both, in one error that
// matches ErrConfig.
func TestNewReportsEveryConfigProblem(t *testing.T) {
	_, err := dynamostore.New(dynamostore.Config{})
	want := "dynamostore: Config.Client is required; Config.Table is required"
	if err == nil || err.Error() != want || !errors.Is(err, dynamostore.ErrConfig) {
		t.Fatalf("New(Config{}) = %v (errors.Is ErrConfig: %v), want %q", err, errors.Is(err, dynamostore.ErrConfig), want)
	}
}
