package dynamostore

import "github.com/idemkit/idemkit/internal/sweeper"

// SweepAPI is the part of *dynamodb.Client the Sweeper uses (Scan and
// DeleteItem).
type SweepAPI = sweeper.API

// Sweeper enforces retention on a table that has no TTL (MRSC global tables
// support neither TTL nor transactions): it deletes the items whose
// expiresAt (Unix seconds) has passed, each with a conditional DeleteItem.
// It works on every idemkit table with that attribute (effects, fence,
// idempotency). It is the kit's internal/sweeper.Sweeper, re-exported here
// for library users; the deployable function functions/sweeper runs it on a
// schedule. See internal/sweeper for its guarantees and defaults.
type Sweeper = sweeper.Sweeper
