package kit

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// HomeClient returns the DynamoDB client for a table whose linearizable
// owner is the home region: client itself when home is "" or client's own
// region, otherwise a copy of client that signs for and calls home.
// Everything else about client (credentials, retries, middleware, HTTP
// client, BaseEndpoint such as DYNAMODB_ENDPOINT) is kept; client itself is
// not modified.
//
// Under fenced-effects these tables are owned by the home region, and every
// region's functions call them there rather than their local replica (the
// effects table's records, FENCE_TABLE_REGION, and the api's runs,
// RunsTableRegion, too):
//
//   - FenceTable (Env.FenceTableRegion, FenceClient): a fencing token from a
//     replica-local table would not be linearizable across regions, which
//     is the whole point of the fence.
//   - IdempotencyTable (Env.IdempotencyTableRegion): Layer-1 claims,
//     completions and replays are conditional writes and consistent reads
//     against the home region's replica, so a key replayed into a second
//     region resolves to the first region's record at once, whatever the
//     replication lag; the table still replicates (global table) for
//     durability and regional reads.
//
// A home region that cannot be reached fails the call (after the client's
// own retries): the caller fails closed and never falls back to the local
// replica.
func HomeClient(client *dynamodb.Client, home string) *dynamodb.Client {
	if home == "" || home == client.Options().Region {
		return client
	}
	return dynamodb.New(client.Options(), func(o *dynamodb.Options) { o.Region = home })
}

// FenceClient returns the DynamoDB client the fence store must use:
// HomeClient(client, region) with region = Env.FenceTableRegion. Under
// fenced-effects every region's executor takes its fencing tokens from the
// FenceTable of the ONE home region.
func FenceClient(client *dynamodb.Client, region string) *dynamodb.Client {
	return HomeClient(client, region)
}
