package dynamostore

import (
	"github.com/idemkit/idemkit/idem/keyspace"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
)

// Item attributes of a Layer-1 record (IdempotencyTable, partition key pk).
// The raw Idempotency-Key is never stored: pk is keyspace.ID's hash.
const (
	attrPK        = "pk"            // S: record ID (caller:v1:<hash>) or chunk key
	attrDigest    = "digest"        // S: request digest
	attrState     = "state"         // S: idem.State
	attrOwner     = "owner"         // S: lease owner token of the current/last claim
	attrLease     = "leaseAt"       // N: lease end, Unix ms (read while pending only)
	attrRenewed   = "renewedAt"     // N: when the owner last wrote its lease, Unix ms (read while pending only)
	attrAttempt   = "attempt"       // N: 1 on first claim, +1 per reclaim
	attrRequestID = "requestId"     // S: request id of the first claim
	attrRawBody   = "rawBodySha256" // S: hex SHA-256 of the raw request body of the last attempt that ended (archive only, under a policy that keeps it; written by the completion or release, never by the claim)
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
// not keyspace.IsCaller, so no caller can name a chunk item.
const chunkPrefix = "chunk:v1:"

func chunkKey(id, nonce string, i int) string {
	return chunkPrefix + id[len(keyspace.CallerPrefix):] + ":" + nonce + ":" + strconv.Itoa(i)
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

// pendingItem is the item a fresh claim writes (no raw-body hash: Claim
// clears it, the completion or release writes it).
func pendingItem(rec idem.Record) map[string]types.AttributeValue {
	m := recordItem(rec, idem.StatePending, 1, rec.Expires, 10)
	m[attrLease] = avN(rec.LeaseExpires.UnixMilli())
	m[attrRenewed] = avN(rec.Renewed.UnixMilli())
	return m
}

// completedItem is the whole item a completion writes in place of the
// pending one: the attributes the claim stored, taken from claim (the
// record Claim returned: id, digest, owner, attempt, first request id),
// the raw-body hash of the attempt that ran (set on claim by the caller;
// absent when it set none), with the outcome's state and retention and,
// for a final state, the response (the inline blob, or the reference to
// its chunks).
// The lease and the owner's liveness (leaseAt, renewedAt) are not written:
// they mean something only while pending.
func completedItem(claim idem.Record, state idem.State, expires time.Time, ref *responseRef) map[string]types.AttributeValue {
	m := recordItem(claim, state, claim.Attempt, expires, 16)
	switch {
	case ref == nil:
	case ref.chunks == 0:
		m[attrBlob] = &types.AttributeValueMemberB{Value: ref.inline}
	default:
		m[attrStatus] = avN(int64(ref.status))
		m[attrEnc] = avS(ref.enc)
		m[attrSha] = &types.AttributeValueMemberB{Value: ref.sha}
		m[attrLen] = avN(int64(ref.length))
		m[attrChunks] = avN(int64(ref.chunks))
		m[attrNonce] = avS(ref.nonce)
	}
	return m
}

// recordItem holds the attributes every record item has: key, digest,
// state, owner, attempt, the optional first request id and raw-body hash,
// and the retention (absent when it never expires). size is a capacity hint.
func recordItem(rec idem.Record, state idem.State, attempt int, expires time.Time, size int) map[string]types.AttributeValue {
	m := make(map[string]types.AttributeValue, size)
	m[attrPK] = avS(rec.ID)
	m[attrDigest] = avS(rec.Digest)
	m[attrState] = avS(string(state))
	m[attrOwner] = avS(rec.Owner)
	m[attrAttempt] = avN(int64(attempt))
	if rec.RequestID != "" {
		// An empty string attribute is refused by DynamoDB before 2020
		// and by DynamoDB Local 1.11 (ValidationException); absent reads
		// back as "".
		m[attrRequestID] = avS(rec.RequestID)
	}
	if rec.RawBodySHA256 != "" {
		m[attrRawBody] = avS(rec.RawBodySHA256)
	}
	if !expires.IsZero() {
		m[attrExpMs] = avN(expires.UnixMilli())
		m[attrTTL] = avN(ttlSeconds(expires))
	}
	return m
}
