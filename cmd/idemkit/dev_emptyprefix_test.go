package main

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestDevEmptyTablePrefixNamesTablesByLogicalID: `idemkit dev
// --table-prefix ""` (an empty value) names each table by its logical ID alone, as
// docs/CLI.md says of an empty --prefix or --table-prefix (and as
// `idemkit tables create --prefix ""` names them), so dev serves tables made
// that way (RED_TEAM 392: dev took the empty prefix for "unset" and used,
// or created, the idemkit- tables instead).
func TestDevEmptyTablePrefixNamesTablesByLogicalID(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	_, url := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", "")
	var names []string
	p := dynamodb.NewListTablesPaginator(e.Client(), &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, page.TableNames...)
	}
	for _, want := range []string{"IdempotencyTable", "EffectsTable", "RunsTable", "FenceTable", "ApiKeysTable", "DevStreamCheckpoints"} {
		if !slices.Contains(names, want) {
			t.Errorf("idemkit dev --table-prefix '' made no table %q; the engine has %v", want, names)
		}
	}
	// And it serves on them.
	if code, _ := devCall(t, "GET", url+"/.well-known/openwop", "", ""); code != 200 {
		t.Errorf("GET /.well-known/openwop: %d", code)
	}
}
