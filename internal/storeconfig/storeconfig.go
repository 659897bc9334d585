// Package storeconfig validates the fields every DynamoDB store's Config
// shares (idem/dynamostore, ledger/dynamostore, ledger/fence/dynamostore):
// one wording of "this field is required" for all of them.
package storeconfig

import "github.com/idemkit/idemkit/internal/configerr"

// Check returns nil when client is set and table is not empty, else a
// *configerr.Error listing every missing field ("<pkg>: Config.Client is
// required; Config.Table is required", Client first) that matches sentinel
// (the store package's ErrConfig) with errors.Is. client is the Config's
// Client field as is: only a nil interface counts as missing.
func Check(pkg string, sentinel error, client any, table string) error {
	var l configerr.List
	if client == nil {
		l.Addf("Config.Client is required")
	}
	if table == "" {
		l.Addf("Config.Table is required")
	}
	return l.Err(pkg, sentinel)
}
