package dynamostore

// IAMActions are the IAM actions a Store needs on its table, and all of
// them: a Lambda role that grants exactly these on the idempotency table's
// ARN is enough for every Store operation (a transactional completion is a
// Put on this table; the business writes passed through idem.Transact need
// their own grants on their own tables).
//
//   - PutItem: claims, completions, and response chunks of large bodies
//   - UpdateItem: reclaims, releases, renewals
//   - GetItem: strongly consistent reads (waiting duplicates; replays on
//     emulators that do not return the item with a failed condition)
//   - BatchGetItem: replays of responses stored in chunks
//   - DeleteItem: outcomes that are never cached, and unused chunks
var IAMActions = []string{
	"dynamodb:BatchGetItem",
	"dynamodb:DeleteItem",
	"dynamodb:GetItem",
	"dynamodb:PutItem",
	"dynamodb:UpdateItem",
}
