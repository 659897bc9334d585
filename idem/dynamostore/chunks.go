package dynamostore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
)

// responseRef is how a completion stores its response: an inline tagged
// blob (the resp attribute alone), or chunk items already written and
// referenced by encoding, length, SHA-256, count and nonce.
type responseRef struct {
	inline []byte // tagged blob (see packInline); nil when chunked
	status int
	enc    string
	sha    []byte
	length int
	chunks int
	nonce  string
}

// matches reports whether st holds exactly this response.
func (r *responseRef) matches(st stored) bool {
	if r.chunks == 0 {
		return st.chunks == 0 && st.enc == "" && bytes.Equal(st.blob, r.inline)
	}
	return bytes.Equal(st.sha, r.sha) && st.length == r.length && st.chunks == r.chunks && st.nonce == r.nonce
}

// storeResponse packs resp. It is stored inline when the completed record
// item of claim (in state, with retention expires) holding it stays within
// recordItemMax; otherwise the blob is written beside the record, as chunk
// items (plain PutItems under a key no one else can produce: it embeds a
// fresh 128-bit nonce) carrying the record's retention, before the
// completion that references them. A response encoding to more than
// maxBlob (a body within idem.MaxResponseBytes with headers beyond the
// room kept for them) is refused with idem.ErrTooLarge, nothing written.
// A chunk write that fails fails it with an error matching
// idem.ErrRecordNotSent beside the chunk write's own (an outage's
// idem.ErrStoreUnavailable, say), the chunks written deleted best effort.
func (s *Store) storeResponse(ctx context.Context, claim idem.Record, state idem.State, resp *idem.Response, expires time.Time) (*responseRef, error) {
	id := claim.ID
	raw := encodeResponse(resp)
	if len(raw) > maxBlob {
		// Only headers beyond the room kept beside a body of at most
		// idem.MaxResponseBytes get here: a blob every replay would
		// refuse to inflate is not written (the Guard records the
		// response as not kept instead).
		return nil, fmt.Errorf("%w: the response encodes to %d bytes (status line, headers and body), more than the %d this store reads back",
			idem.ErrTooLarge, len(raw), maxBlob)
	}
	blob, enc := packEncoded(raw)
	if inline := tagInline(blob, enc); fitsInline(claim, state, expires, inline) {
		return &responseRef{inline: inline}, nil
	}
	sum := sha256.Sum256(blob)
	ref := &responseRef{status: resp.Status, enc: enc, sha: sum[:], length: len(blob)}
	var nb [16]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return nil, err
	}
	ref.nonce = hex.EncodeToString(nb[:])
	parts := split(blob)
	ref.chunks = len(parts)
	if err := s.parallel(ctx, len(parts), func(ctx context.Context, i int) error {
		item := map[string]types.AttributeValue{
			attrPK:   avS(chunkKey(id, ref.nonce, i)),
			attrData: &types.AttributeValueMemberB{Value: parts[i]},
		}
		if !expires.IsZero() {
			item[attrExpMs] = avN(expires.UnixMilli())
			item[attrTTL] = avN(ttlSeconds(expires))
		}
		_, err := s.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: s.table, Item: item})
		if err != nil {
			return fmt.Errorf("dynamostore: chunk PutItem: %w", err)
		}
		return nil
	}); err != nil {
		s.dropChunks(ctx, id, ref)
		// The record's write comes after the chunks': it was not sent,
		// and the record is as the claim left it (RED_TEAM 419).
		return nil, fmt.Errorf("%w: %w", idem.ErrRecordNotSent, err)
	}
	return ref, nil
}

// dropChunks deletes the chunk items of a completion that was not applied
// (best effort: one left, referenced by nothing, ends with the record's
// retention, which under a retention of forever is never). The deletes run without ctx's cancellation but within its
// deadline, if it has one, or dropGrace from now when that is later (the
// chunk writes were cut by it): a store that stalls never holds the call
// much past the bound its caller set (idem.Config.StoreTimeout). A call
// without a deadline (cancelled, or failed, with none) gives its deletes
// idem.DefaultStoreTimeout from now: never without bound.
func (s *Store) dropChunks(ctx context.Context, id string, ref *responseRef) {
	if ref == nil || ref.chunks == 0 {
		return
	}
	left, bounded := clock.Remaining(ctx)
	if !bounded {
		left = idem.DefaultStoreTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(left, dropGrace))
	defer cancel()
	_ = s.parallel(ctx, ref.chunks, func(ctx context.Context, i int) error {
		_, err := s.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: s.table,
			Key:       map[string]types.AttributeValue{attrPK: avS(chunkKey(id, ref.nonce, i))},
		})
		return err
	})
}

// dropGrace is the least time dropChunks gives its deletes.
const dropGrace = 100 * time.Millisecond

// chunkWriters bounds the concurrent requests of one chunked write.
const chunkWriters = 4

func (s *Store) parallel(ctx context.Context, n int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for w := 0; w < min(chunkWriters, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// withResponse returns st's record with its response loaded (final states):
// inline, or reassembled from its chunks with one strongly consistent
// BatchGetItem (repeated only for unprocessed keys) and checked against the
// stored length and SHA-256. A chunk item that is not there is
// idem.ErrNotKept; one that does not match is a corruption error.
func (s *Store) withResponse(ctx context.Context, st stored) (idem.Record, error) {
	rec := st.rec
	if !rec.State.Final() {
		rec.Response = nil
		return rec, nil
	}
	if st.chunks == 0 && st.enc == "" {
		// Inline, tagged (the current layout).
		resp, err := unpackInline(st.blob)
		if err != nil {
			return idem.Record{}, fmt.Errorf("record %s: %w", logID(rec.ID), err)
		}
		rec.Response = resp
		return rec, nil
	}
	// Chunked, or inline as written by earlier versions (resp with respEnc,
	// respLen and respSha).
	blob := st.blob
	if st.chunks != 0 {
		// The reference is checked before any chunk is read: a count or
		// length no completion writes (altered, or corrupt) is a
		// corruption error, never an allocation sized by it nor a read
		// of chunks no completion wrote (RED_TEAM 547). Every version
		// split the whole blob into chunkSize pieces.
		limit := maxBlob // a deflated blob is shorter than what it inflates to
		if st.enc != encFlate {
			limit = maxStoredRaw
		}
		if st.length <= 0 || st.length > limit || st.chunks != (st.length+chunkSize-1)/chunkSize {
			return idem.Record{}, fmt.Errorf("%w: record %s: %d chunk items for %d bytes", errCorrupt, logID(rec.ID), st.chunks, st.length)
		}
		var err error
		blob, err = s.readChunks(ctx, rec.ID, st)
		if err != nil {
			return idem.Record{}, err
		}
	}
	if len(blob) != st.length {
		return idem.Record{}, fmt.Errorf("%w: record %s: %d bytes, want %d", errCorrupt, logID(rec.ID), len(blob), st.length)
	}
	if sum := sha256.Sum256(blob); !bytes.Equal(sum[:], st.sha) {
		return idem.Record{}, fmt.Errorf("%w: record %s: checksum mismatch", errCorrupt, logID(rec.ID))
	}
	resp, err := unpack(blob, st.enc)
	if err != nil {
		return idem.Record{}, fmt.Errorf("record %s: %w", logID(rec.ID), err)
	}
	rec.Response = resp
	return rec, nil
}

// maxStoredRaw bounds the length of a raw (not deflated) chunked blob a
// replay reads: versions before the store refused blobs beyond maxBlob
// (RED_TEAM 15) wrote such blobs of incompressible bodies with large
// headers, and they still read back. Nothing near it was ever written.
const maxStoredRaw = 64 << 20

// chunkReadPause is the pause before the second BatchGetItem round of a
// chunk read that left keys unprocessed; each later pause doubles, up to
// chunkReadPauseMax (about 15 s over the 21 rounds before the read is
// an outage). Variables only so that tests can shorten them.
var chunkReadPause, chunkReadPauseMax = 10 * time.Millisecond, time.Second

func (s *Store) readChunks(ctx context.Context, id string, st stored) ([]byte, error) {
	parts := make([][]byte, st.chunks)
	pending := make([]map[string]types.AttributeValue, 0, st.chunks)
	index := make(map[string]int, st.chunks)
	for i := 0; i < st.chunks; i++ {
		k := chunkKey(id, st.nonce, i)
		index[k] = i
		pending = append(pending, map[string]types.AttributeValue{attrPK: avS(k)})
	}
	delay := chunkReadPause
	for round := 0; len(pending) > 0; round++ {
		if round > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(delay):
			}
			delay = min(2*delay, chunkReadPauseMax)
		}
		if round > 20 {
			// DynamoDB leaves keys unprocessed when the read would
			// exceed the table's capacity: a throttled read, so the
			// store is unavailable (503 with Retry-After), as for a
			// throttled call.
			return nil, fmt.Errorf("%w: dynamostore: chunks of %s: BatchGetItem keeps leaving keys unprocessed", idem.ErrStoreUnavailable, logID(id))
		}
		batch := pending[:min(100, len(pending))]
		out, err := s.c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			*s.table: {Keys: batch, ConsistentRead: aws.Bool(true)},
		}})
		if err != nil {
			return nil, fmt.Errorf("dynamostore: chunks BatchGetItem: %w", err)
		}
		rest := pending[len(batch):]
		if u, ok := out.UnprocessedKeys[*s.table]; ok {
			rest = append(append([]map[string]types.AttributeValue(nil), u.Keys...), rest...)
		}
		for _, it := range out.Responses[*s.table] {
			i, ok := index[getS(it, attrPK)]
			if !ok {
				continue
			}
			parts[i] = getB(it, attrData)
		}
		pending = rest
	}
	var buf bytes.Buffer
	buf.Grow(st.length)
	for i, p := range parts {
		if p == nil {
			// A strongly consistent read found no such item, and did not
			// leave it unprocessed: it is gone (an engine lost it, or its
			// TTL deletion came before the record's). The response can
			// never be replayed byte-exactly; the record stays final, so
			// the work is not run again (the Guard answers 410).
			return nil, fmt.Errorf("%w: dynamostore: record %s: chunk %d of %d missing", idem.ErrNotKept, logID(id), i, st.chunks)
		}
		buf.Write(p)
	}
	return buf.Bytes(), nil
}
