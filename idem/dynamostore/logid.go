package dynamostore

import "github.com/idemkit/idemkit/internal/keyhash"

// logID names a record in an error: the keyed hash of its ID, never the ID.
// The ID is an unkeyed hash of the tenant, the operation and the key, so a
// guessed key could be checked against a logged one.
func logID(id string) string { return keyhash.Log(id) }
