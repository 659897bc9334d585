package dynamostore

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/internal/respsize"
	"github.com/idemkit/idemkit/internal/itemsize"
)

// Stored response encoding.
//
// A response is serialised into one byte-exact blob (format v1 below), then
// deflated (compress/flate, BestSpeed) when that makes it smaller. A blob
// is stored in the record item itself only while the item stays within
// recordItemMax (fitsInline); a larger one is split into chunk items of at
// most chunkSize bytes, written before the completion, and referenced from
// the record (nonce, count, length and SHA-256 of the blob, checked on
// read).
//
// Format v1: byte 1, uvarint status, uvarint header count, per header (in
// sorted key order) uvarint key length, key, uvarint value count, per value
// uvarint length, value; then the body to the end. Header values and body
// are arbitrary bytes: nothing is normalised or re-encoded.
//
// Not kept (idem.Response.NotKept): byte 'N', uvarint status, uvarint size,
// nothing after. It is a few bytes, so always stored raw and inline; a
// blob of the formats before it never starts with 'N', so every record
// written before reads exactly as before (NotKept zero).
const (
	formatV1      = 1
	formatNotKept = 'N'

	encRaw   = "raw"
	encFlate = "flate"

	// recordItemMax bounds the completed record item (DynamoDB's item size,
	// internal/itemsize, which counts numbers as DynamoDB Local stores
	// them: RED_TEAM 578): one write unit. Every conditional write against
	// the record — the claim of a replay, of an in-flight answer, of a
	// mismatch, and the completion — is then billed one write unit under
	// either reading of AWS's rule (the existing item's size, or the larger
	// of the existing and the new item), whatever the response's size. A
	// response whose blob does not fit beside the record's own attributes
	// (about 600 bytes of blob for a typical record) is stored in chunk
	// items beside it and read, on a replay only, by one consistent
	// BatchGetItem.
	recordItemMax = itemsize.WriteUnit
	// chunkSize is the payload of one chunk item.
	chunkSize = 350 << 10
	// compressMin: blobs shorter than this are stored raw.
	compressMin = 512
	// maxBlob bounds the decoded blob (body limit plus generous header room);
	// it guards decompression, and the store refuses to write a larger one
	// (idem.ErrTooLarge), which it could not read back.
	maxBlob = respsize.Max
)

var errCorrupt = errors.New("dynamostore: stored response is corrupt")

func encodeResponse(r *idem.Response) []byte {
	if r.NotKept > 0 {
		b := make([]byte, 0, 1+2*binary.MaxVarintLen64)
		b = append(b, formatNotKept)
		b = binary.AppendUvarint(b, uint64(r.Status))
		return binary.AppendUvarint(b, uint64(r.NotKept))
	}
	n := 1 + binary.MaxVarintLen64*2 + len(r.Body)
	keys := make([]string, 0, len(r.Headers))
	for k, vs := range r.Headers {
		keys = append(keys, k)
		n += binary.MaxVarintLen64*2 + len(k)
		for _, v := range vs {
			n += binary.MaxVarintLen64 + len(v)
		}
	}
	sort.Strings(keys)
	b := make([]byte, 0, n)
	b = append(b, formatV1)
	b = binary.AppendUvarint(b, uint64(r.Status))
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		vs := r.Headers[k]
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return append(b, r.Body...)
}

func decodeResponse(b []byte) (*idem.Response, error) {
	if len(b) > 0 && b[0] == formatNotKept {
		return decodeNotKept(b[1:])
	}
	if len(b) == 0 || b[0] != formatV1 {
		return nil, errCorrupt
	}
	b = b[1:]
	next := func() (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, errCorrupt
		}
		b = b[n:]
		return v, nil
	}
	bytesN := func() (string, error) {
		l, err := next()
		if err != nil || l > uint64(len(b)) {
			return "", errCorrupt
		}
		s := string(b[:l])
		b = b[l:]
		return s, nil
	}
	status, err := next()
	if err != nil || status > 999 {
		return nil, errCorrupt
	}
	nh, err := next()
	if err != nil || nh > uint64(len(b)) {
		return nil, errCorrupt
	}
	r := &idem.Response{Status: int(status)}
	if nh > 0 {
		r.Headers = make(map[string][]string, nh)
	}
	for i := uint64(0); i < nh; i++ {
		k, err := bytesN()
		if err != nil {
			return nil, err
		}
		nv, err := next()
		if err != nil || nv > uint64(len(b))+1 {
			return nil, errCorrupt
		}
		vs := make([]string, 0, nv)
		for j := uint64(0); j < nv; j++ {
			v, err := bytesN()
			if err != nil {
				return nil, err
			}
			vs = append(vs, v)
		}
		r.Headers[k] = vs
	}
	if len(b) > 0 {
		r.Body = append([]byte(nil), b...)
	}
	return r, nil
}

// decodeNotKept reads the status and size of a not-kept response (after
// its format byte).
func decodeNotKept(b []byte) (*idem.Response, error) {
	status, n := binary.Uvarint(b)
	if n <= 0 || status > 999 {
		return nil, errCorrupt
	}
	size, m := binary.Uvarint(b[n:])
	if m <= 0 || n+m != len(b) || size == 0 || size > math.MaxInt {
		return nil, errCorrupt
	}
	return &idem.Response{Status: int(status), NotKept: int(size)}, nil
}

// packEncoded compresses the encoded response raw when that helps.
func packEncoded(raw []byte) (blob []byte, enc string) {
	if len(raw) < compressMin {
		return raw, encRaw
	}
	var buf bytes.Buffer
	buf.Grow(len(raw) / 2)
	w, _ := flate.NewWriter(&buf, flate.BestSpeed)
	_, _ = w.Write(raw)
	_ = w.Close()
	if buf.Len() >= len(raw) {
		return raw, encRaw
	}
	return buf.Bytes(), encFlate
}

// tagFlate starts an inline blob holding a deflated format-v1 blob. A raw
// format-v1 blob starts with formatV1 (a not-kept one with formatNotKept),
// so the first byte of every inline blob says how to read it and the
// record needs no encoding attribute.
const tagFlate = 2

// tagInline returns the inline form of a packed blob: as is when raw, with
// tagFlate in front when deflated.
func tagInline(blob []byte, enc string) []byte {
	if enc == encRaw {
		return blob
	}
	return append([]byte{tagFlate}, blob...)
}

// unpackInline reverses tagInline and pack.
func unpackInline(b []byte) (*idem.Response, error) {
	if len(b) == 0 {
		return nil, errCorrupt
	}
	switch b[0] {
	case formatV1, formatNotKept:
		return unpack(b, encRaw)
	case tagFlate:
		return unpack(b[1:], encFlate)
	}
	return nil, fmt.Errorf("%w: unknown inline tag %d", errCorrupt, b[0])
}

// unpack reverses pack.
func unpack(blob []byte, enc string) (*idem.Response, error) {
	switch enc {
	case encRaw:
		return decodeResponse(blob)
	case encFlate:
		raw, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(blob)), maxBlob+1))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errCorrupt, err)
		}
		if len(raw) > maxBlob {
			return nil, fmt.Errorf("%w: inflates beyond %d bytes", errCorrupt, maxBlob)
		}
		return decodeResponse(raw)
	default:
		return nil, fmt.Errorf("%w: unknown encoding %q", errCorrupt, enc)
	}
}

// split cuts blob into chunkSize pieces (no copy).
func split(blob []byte) [][]byte {
	var out [][]byte
	for len(blob) > chunkSize {
		out = append(out, blob[:chunkSize])
		blob = blob[chunkSize:]
	}
	return append(out, blob)
}

// fitsInline reports whether the completed record item of claim, in state
// with retention expires, holding the inline blob stays within
// recordItemMax.
func fitsInline(claim idem.Record, state idem.State, expires time.Time, inline []byte) bool {
	base := itemsize.Of(completedItem(claim, state, expires, nil))
	return base+len(attrBlob)+len(inline) <= recordItemMax
}
