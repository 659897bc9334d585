// Package host is the shared code of idemkit's reference host: the Lambda
// functions in functions/ (api, authorizer, executor, auditor, and the MRSC-only
// sweeper) and
// `idemkit dev`, which runs the same handlers on one machine.
//
// It holds the runs store (RunsTable), the API-key store (ApiKeysTable,
// SHA-256 hashes only), the tenant-bound runId grammar and its path
// projection, the built-in workflows, the webhook effect (through the
// ledger), the capabilities document, stream record decoding and the
// environment configuration shared by the functions.
package host
