package dynamostore

// IAMActions are the IAM actions a ledger worker's Store needs on the
// effects table itself, and all of them for a worker that only calls
// Ledger.Do, DoStream or FireOnce: a role that grants exactly these on the
// table's ARN is enough. A function that also lists a run's effects
// (Witness, resolving a run's escaped effects) adds IndexIAMActions on the
// byRun index.
//
//   - PutItem: claims, fire marks, heartbeats, outcomes, releases and run
//     references (every ledger write is one conditional PutItem)
//   - GetItem: strongly consistent reads (a duplicate on emulators that do
//     not return the item with a failed condition, a waiting duplicate, the
//     records the witness lists)
var IAMActions = []string{
	"dynamodb:GetItem",
	"dynamodb:PutItem",
}

// IndexIAMActions are the IAM actions the Store needs on the table's byRun
// index (ARN "<table ARN>/index/byRun"): the Query behind ListByRun, which
// Ledger.Witness and resolving a run's escaped effects call. A worker that
// only calls Do, DoStream or FireOnce never makes it: do not grant it
// there.
var IndexIAMActions = []string{
	"dynamodb:Query",
}

// ScanIAMActions are the IAM actions of Store.Scan, operator tooling only
// (`idemkit effects list` without a run), on the table's ARN: never needed
// by a worker.
var ScanIAMActions = []string{
	"dynamodb:Scan",
}
