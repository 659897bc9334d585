package storeconfig

import (
	"errors"
	"strings"

	"github.com/aws/smithy-go"
)

// keySchemaMessages are the ValidationException messages with which
// DynamoDB and the emulators (DynamoDB Local, moto, dynalite) refuse an item
// or a key that does not fit the table's key schema. A store always sends
// the keys of the table it was written for, so on its own table these mean
// the table was created with other keys.
var keySchemaMessages = []string{
	"key element does not match the schema",       // DynamoDB, moto, dynalite (GetItem)
	"missing the key",                             // DynamoDB, moto, dynalite (PutItem)
	"required keys was not given a value",         // DynamoDB Local
	"type mismatch for key",                       // a key attribute of another type
	"number of conditions on the keys is invalid", // DynamoDB Local (GetItem)
}

// TableProblem reports whether err, returned by a DynamoDB call, says the
// table is not the one the store was configured for: it does not exist
// (ResourceNotFoundException), or its key schema is another one (a
// ValidationException about the key). It returns what is wrong, in words
// an operator acts on, or "" when err is anything else (an outage, a
// failed condition, a cancelled transaction).
func TableProblem(err error) string {
	var ae smithy.APIError
	if err == nil || !errors.As(err, &ae) {
		return ""
	}
	switch ae.ErrorCode() {
	case "ResourceNotFoundException":
		return "the table does not exist"
	case "ValidationException":
		msg := strings.ToLower(ae.ErrorMessage())
		for _, m := range keySchemaMessages {
			if strings.Contains(msg, m) {
				return "the table's key schema is not the one the store writes"
			}
		}
	}
	return ""
}
