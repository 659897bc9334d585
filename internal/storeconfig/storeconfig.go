// Package storeconfig validates the fields every DynamoDB store's Config
// shares (idem/dynamostore, ledger/dynamostore, ledger/fence/dynamostore):
// one wording of "this field is required" for all of them.
package storeconfig

import "errors"

// Check returns nil when client is set and table is not empty, else an
// error "<pkg>: Config.Client is required" or "<pkg>: Config.Table is
// required" for the first missing field (Client first). client is the
// Config's Client field as is: only a nil interface counts as missing.
func Check(pkg string, client any, table string) error {
	if client == nil {
		return errors.New(pkg + ": Config.Client is required")
	}
	if table == "" {
		return errors.New(pkg + ": Config.Table is required")
	}
	return nil
}
