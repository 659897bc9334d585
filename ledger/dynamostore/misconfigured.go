package dynamostore

import (
	"fmt"

	"github.com/idemkit/idemkit/internal/storeconfig"
	"github.com/idemkit/idemkit/ledger"
)

// classify wraps the error of the DynamoDB call op: with
// ledger.ErrStoreMisconfigured, naming the table and the shape the store
// needs, when it says the table is missing or has another key schema
// (storeconfig.TableProblem); else as it is, under the call's name.
func (s *Store) classify(op string, err error) error {
	if what := storeconfig.TableProblem(err); what != "" {
		return fmt.Errorf("%w: table %q: %s (the store's table is created from template.yaml's EffectsTable: pk S and sk S, GSI %s): dynamostore: %s: %w",
			ledger.ErrStoreMisconfigured, s.table, what, IndexByRun, op, err)
	}
	return fmt.Errorf("dynamostore: %s: %w", op, err)
}
