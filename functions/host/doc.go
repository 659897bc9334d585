// Package host is the parent of the shared code of idemkit's reference host:
// the Lambda functions in functions/ (api, authorizer, executor, auditor, and
// the MRSC-only sweeper) and `idemkit dev`, which runs the same handlers on
// one machine. It holds no code; each concept has one package:
//
//   - runs: the run record and its lifecycle, the runs store (RunsTable,
//     memory and DynamoDB), the tenant-bound runId grammar and its path
//     projection, the run version history and the offline-write inbox;
//   - apikeys: the API-key store (ApiKeysTable, SHA-256 hashes only), the
//     credential attributes a key carries and the run owner subject;
//   - webhook: the built-in workflows and their createRun request, the
//     webhook destination policy and the webhook effect (through the ledger);
//   - settings: the one settings table, Env and LoadEnv, and the
//     capabilities (discovery) document derived from them;
//   - stream: DynamoDB stream records, from Lambda or from the streams API;
//   - boot: the ground of the start-up (logger, Must, Getenv, the DynamoDB
//     client from the default AWS configuration, the init trace), depending
//     on no other host package; its users are kit and the authorizer, which
//     starts from it alone for its cold start;
//   - kit: the start-up every other main goes through (Boot and Begin,
//     giving a Start) and the wiring: the home- and fence-region clients
//     and the stores, Layer 1, Layer 2 and the webhook effect built from
//     one Env (NewKit). Only kit and boot read the process environment.
package host
