package dynamostore_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/ledger/dynamostore"
)

// newStore is dynamostore.New for a test: a Config error fails it.
func newStore(t testing.TB, client dynamostore.API, table string) *dynamostore.Store {
	t.Helper()
	st, err := dynamostore.New(dynamostore.Config{Client: client, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// New rejects a Config without a Client or a Table, naming the field.
func TestNewValidatesConfig(t *testing.T) {
	client := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	for _, c := range []struct {
		cfg  dynamostore.Config
		want string
	}{
		{dynamostore.Config{Table: "t"}, "dynamostore: Config.Client is required"},
		{dynamostore.Config{Client: client}, "dynamostore: Config.Table is required"},
	} {
		if st, err := dynamostore.New(c.cfg); err == nil || err.Error() != c.want || st != nil {
			t.Errorf("New(%+v) = %v, %v; want nil, %q", c.cfg, st, err, c.want)
		}
	}
	if _, err := dynamostore.New(dynamostore.Config{Client: client, Table: "t"}); err != nil {
		t.Errorf("New(complete Config) = %v", err)
	}
}

// New with neither a Client nor a Table reports both, in one error that
// matches ErrConfig.
func TestNewReportsEveryConfigProblem(t *testing.T) {
	_, err := dynamostore.New(dynamostore.Config{})
	want := "dynamostore: Config.Client is required; Config.Table is required"
	if err == nil || err.Error() != want || !errors.Is(err, dynamostore.ErrConfig) {
		t.Fatalf("New(Config{}) = %v (errors.Is ErrConfig: %v), want %q", err, errors.Is(err, dynamostore.ErrConfig), want)
	}
}
