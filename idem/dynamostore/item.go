package dynamostore

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
)

// Item attributes of a Layer-1 record (IdempotencyTable, partition key pk).
// The raw Idempotency-Key is never stored: pk is idem.ScopeID's hash.
const (
	attrPK        = "pk"            // S: record ID (caller:v1:<hash>) or chunk key
	attrDigest    = "digest"        // S: request digest
	attrState     = "state"         // S: idem.State
	attrOwner     = "owner"         // S: lease owner token of the current/last claim
	attrLease     = "leaseAt"       // N: lease end, Unix ms (read while pending only)
	attrRenewed   = "renewedAt"     // N: when the owner last wrote its lease, Unix ms (read while pending only)
	attrAttempt   = "attempt"       // N: 1 on first claim, +1 per reclaim
	attrRequestID = "requestId"     // S: request id of the first claim
	attrRawBody   = "rawBodySha256" // S: hex SHA-256 of the raw request body of the last claim (archive only)
	attrExpMs     = "expiresAtMs"   // N: retention end, Unix ms; absent = never
	attrTTL       = "expiresAt"     // N: retention end, Unix s (rounded up): the table's TTL attribute
	attrStatus    = "status"        // N: cached HTTP status, chunked responses (informational; the blob is authoritative)
	attrBlob      = "resp"          // B: inline response: tagged blob (see tagInline); written alone
	attrEnc       = "respEnc"       // S: blob encoding, chunked responses (and inline ones of earlier versions): raw | flate
	attrSha       = "respSha"       // B: SHA-256 of the blob, chunked (and earlier inline) responses
	attrLen       = "respLen"       // N: blob length, chunked (and earlier inline) responses
	attrChunks    = "respChunks"    // N: number of chunk items (0 / absent = inline)
	attrNonce     = "respNonce"     // S: chunk-key nonce of this completion
	attrData      = "data"          // B: chunk payload (chunk items only)
)

// responseAttrs are removed whenever a record leaves a final state.
var responseAttrs = []string{attrStatus, attrBlob, attrEnc, attrSha, attrLen, attrChunks, attrNonce}

// chunkPrefix starts the key of chunk items. Claim refuses every ID that is
// not idem.IsCallerID, so no caller can name a chunk item.
const chunkPrefix = "chunk:v1:"

func chunkKey(id, nonce string, i int) string {
	return chunkPrefix + id[len(idem.CallerPrefix):] + ":" + nonce + ":" + strconv.Itoa(i)
}

func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func avN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func msec(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Truncate(time.Millisecond)
}

// ttlSeconds is the TTL attribute for retention end t: rounded up, so
// DynamoDB's sweep never removes a record before its logical expiry.
func ttlSeconds(t time.Time) int64 {
	s := t.Unix()
	if t.After(time.Unix(s, 0)) {
		s++
	}
	return s
}

// stored is a decoded record item.
type stored struct {
	rec idem.Record
	// response reference (final states)
	status int
	blob   []byte
	enc    string
	sha    []byte
	length int
	chunks int
	nonce  string
}

func getS(m map[string]types.AttributeValue, k string) string {
	if v, ok := m[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(m map[string]types.AttributeValue, k string) (int64, bool) {
	v, ok := m[k].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}

func getB(m map[string]types.AttributeValue, k string) []byte {
	if v, ok := m[k].(*types.AttributeValueMemberB); ok {
		return v.Value
	}
	return nil
}

// decode parses a record item; ok is false for an empty item.
func decode(m map[string]types.AttributeValue) (stored, bool) {
	if len(m) == 0 || getS(m, attrPK) == "" {
		return stored{}, false
	}
	var s stored
	s.rec.ID = getS(m, attrPK)
	s.rec.Digest = getS(m, attrDigest)
	s.rec.State = idem.State(getS(m, attrState))
	s.rec.Owner = getS(m, attrOwner)
	s.rec.RequestID = getS(m, attrRequestID)
	s.rec.RawBodySHA256 = getS(m, attrRawBody)
	if n, ok := getN(m, attrLease); ok && s.rec.State == idem.StatePending {
		// The lease means something only while pending; a completion
		// leaves the attribute in place rather than spend a REMOVE on it.
		s.rec.LeaseExpires = time.UnixMilli(n)
	}
	if n, ok := getN(m, attrRenewed); ok && s.rec.State == idem.StatePending {
		s.rec.Renewed = time.UnixMilli(n) // like the lease: left in place by completions
	}
	if n, ok := getN(m, attrAttempt); ok {
		s.rec.Attempt = int(n)
	}
	if n, ok := getN(m, attrExpMs); ok {
		s.rec.Expires = time.UnixMilli(n)
	}
	if n, ok := getN(m, attrStatus); ok {
		s.status = int(n)
	}
	s.blob = getB(m, attrBlob)
	s.enc = getS(m, attrEnc)
	s.sha = getB(m, attrSha)
	if n, ok := getN(m, attrLen); ok {
		s.length = int(n)
	}
	if n, ok := getN(m, attrChunks); ok {
		s.chunks = int(n)
	}
	s.nonce = getS(m, attrNonce)
	return s, true
}

// pendingItem is the item a fresh claim writes.
func pendingItem(rec idem.Record) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		attrPK:      avS(rec.ID),
		attrDigest:  avS(rec.Digest),
		attrState:   avS(string(idem.StatePending)),
		attrOwner:   avS(rec.Owner),
		attrLease:   avN(rec.LeaseExpires.UnixMilli()),
		attrRenewed: avN(rec.Renewed.UnixMilli()),
		attrAttempt: avN(1),
	}
	if rec.RequestID != "" {
		// An empty string attribute is refused by DynamoDB before 2020
		// and by DynamoDB Local 1.11 (ValidationException); absent reads
		// back as "".
		m[attrRequestID] = avS(rec.RequestID)
	}
	if rec.RawBodySHA256 != "" {
		m[attrRawBody] = avS(rec.RawBodySHA256)
	}
	if !rec.Expires.IsZero() {
		m[attrExpMs] = avN(rec.Expires.UnixMilli())
		m[attrTTL] = avN(ttlSeconds(rec.Expires))
	}
	return m
}
