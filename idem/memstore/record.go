package memstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/idemkit/idemkit/idem"
)

// A stored record is one pointer-free byte slice (its length is its
// capacity): a fixed head holding the attempt, the three times, the
// references of the record's strings and of its final response, then
// those strings and that response, written one after the other. The
// collector marks such a record without scanning it (no pointer in it),
// and a map slot's two pointers (its key, a view of the record's ID, and
// its value) lead to the same object, so a store holding many records
// costs each collection far less than records of strings, slices and
// maps would.
//
// Bytes once written after the head are never written again: the strings
// and response bodies handed to callers are views of them (a string) or
// copies (a body, header lists). A write changes the head in place and
// appends what it adds (a new state, a raw body hash, the final response)
// after the bytes in use when the room left at the end holds it, and
// otherwise stores a new slice with them.

// Offsets in a record's head. Integers are little-endian; a string or a
// response is referenced by its offset and length (uint32 each).
const (
	offUsed    = 0  // uint32: bytes in use
	offLen     = 4  // uint32: the record's length
	offAttempt = 8  // int64
	offLease   = 16 // time (16 bytes: see putTime)
	offRenewed = 32
	offExpires = 48
	offStrings = 64 // nStrings references of 8 bytes
	offResp    = offStrings + 8*nStrings
	headLen    = offResp + 8
)

// The record's strings, in the order of their references.
const (
	sID = iota
	sDigest
	sState
	sOwner
	sRequestID
	sRawBodySHA256
	nStrings
)

// A claimed record is given room at its end for its completion (the new
// state, the raw body hash, the final response), so that completing it
// writes in place: as much as the store's last completion needed
// (Store.spare), from firstSpare, up to maxSpare.
const (
	firstSpare = 128
	maxSpare   = 1024
)

var le = binary.LittleEndian

// maxRecord is the largest record the store keeps: its offsets and
// lengths are 32-bit (and where int is 32 bits, it is the largest int).
// A claim, a completion or a release whose record would be larger fails
// with idem.ErrTooLarge and writes nothing, and no record's allocation
// is taken past it.
var maxRecord = min(math.MaxUint32, math.MaxInt)

// str returns the string i of record b, a view of its bytes.
func str(b []byte, i int) string {
	o := offStrings + 8*i
	off, n := le.Uint32(b[o:]), le.Uint32(b[o+4:])
	if n == 0 {
		return ""
	}
	return unsafe.String(&b[off], n)
}

// used returns the bytes of b in use.
func used(b []byte) int { return int(le.Uint32(b[offUsed:])) }

// room reports whether n more bytes fit at b's end.
func room(b []byte, n int) bool { return used(b)+n <= len(b) }

// appendRef writes s at b's end (which has room for it) and references
// it as string i.
func appendRef(b []byte, i int, s string) {
	u := used(b)
	copy(b[u:], s)
	o := offStrings + 8*i
	le.PutUint32(b[o:], uint32(u))
	le.PutUint32(b[o+4:], uint32(len(s)))
	le.PutUint32(b[offUsed:], uint32(u+len(s)))
}

// alloc returns a zeroed record slice of at least n bytes (callers keep
// n within maxRecord), as long as its allocation but never longer than
// maxRecord, with nothing in use after its head.
func alloc(n int) []byte {
	b := append([]byte(nil), make([]byte, n)...)
	b = b[:max(n, min(cap(b), maxRecord))] // its length is a uint32 in its head
	le.PutUint32(b[offUsed:], headLen)
	le.PutUint32(b[offLen:], uint32(len(b)))
	return b
}

// bytesAt returns the record whose first byte is at p (nil for nil): a
// map slot holds only that pointer, its length is in the record's head.
func bytesAt(p *byte) []byte {
	if p == nil {
		return nil
	}
	return unsafe.Slice(p, le.Uint32(unsafe.Slice(p, headLen)[offLen:]))
}

// recordLen returns the bytes a record holding r (its Response ignored)
// and resp (nil for none) uses.
func recordLen(r *idem.Record, resp *idem.Response) int {
	return headLen + len(r.ID) + len(r.Digest) + len(r.State) + len(r.Owner) + len(r.RequestID) + len(r.RawBodySHA256) + responseLen(resp)
}

// tooLarge returns idem.ErrTooLarge when a record holding r and resp
// would pass maxRecord, else nil.
func tooLarge(r *idem.Record, resp *idem.Response) error {
	if n := recordLen(r, resp); n > maxRecord {
		return fmt.Errorf("%w: a record of %d bytes, more than %d", idem.ErrTooLarge, n, maxRecord)
	}
	return nil
}

// encode returns a new record slice holding r (its Response ignored) and
// resp (nil for none), which fit in maxRecord (tooLarge), with up to
// extra bytes of room at its end (as many as maxRecord leaves).
func (s *Store) encode(r *idem.Record, resp *idem.Response, extra int) []byte {
	strs := [nStrings]string{sID: r.ID, sDigest: r.Digest, sState: string(r.State), sOwner: r.Owner, sRequestID: r.RequestID, sRawBodySHA256: r.RawBodySHA256}
	n := recordLen(r, resp)
	n += max(0, min(extra, maxRecord-n))
	b := alloc(n)
	for i, v := range strs {
		appendRef(b, i, v)
	}
	s.setHead(b, r)
	appendResponse(b, resp)
	return b
}

// setHead writes r's attempt and times into b's head.
func (s *Store) setHead(b []byte, r *idem.Record) {
	le.PutUint64(b[offAttempt:], uint64(r.Attempt))
	s.putTime(b[offLease:], r.LeaseExpires)
	s.putTime(b[offRenewed:], r.Renewed)
	s.putTime(b[offExpires:], r.Expires)
}

// Location codes of a stored time: zero time, UTC, time.Local, else
// locBase plus the location's index in Store.locs.
const (
	locZero = iota
	locUTC
	locLocal
	locBase
)

// putTime writes t into b's first 16 bytes: Unix seconds, nanoseconds and
// location (by identity: a time read back is the time written, location
// included, as == compares it). t carries no monotonic reading (msec).
func (s *Store) putTime(b []byte, t time.Time) {
	var code uint32
	switch loc := t.Location(); {
	case t.IsZero():
		code = locZero
	case loc == time.UTC:
		code = locUTC
	case loc == time.Local:
		code = locLocal
	default:
		code = locBase + s.locIndex(loc)
	}
	le.PutUint64(b, uint64(t.Unix()))
	le.PutUint32(b[8:], uint32(t.Nanosecond()))
	le.PutUint32(b[12:], code)
}

// locIndex returns loc's index in s.locs, adding it (caller holds mu).
func (s *Store) locIndex(loc *time.Location) uint32 {
	if i, ok := s.locIx[loc]; ok {
		return i
	}
	i := uint32(len(s.locs))
	s.locs = append(s.locs, loc)
	s.locIx[loc] = i
	return i
}

// minLocs is the number of locations the store keeps before it first
// lets go of those no stored record uses.
const minLocs = 64

// compactLocs lets go of the locations no stored record uses once the
// store holds twice as many as after its last compaction, and at least
// minLocs and one per stored record (a compaction reads every record, so
// a write pays for it only once in as many writes), renumbering those in
// use in the records' heads: a caller whose times each carry a location
// of their own (time.Parse returns one per offset it reads) does not make
// the store grow without bound. It runs at the start of a write, before
// that write encodes any time (caller holds mu).
func (s *Store) compactLocs() {
	if len(s.locs) < max(minLocs, 2*s.locsLive, len(s.recs)) {
		return
	}
	var locs []*time.Location
	renum := make(map[uint32]uint32)
	for _, p := range s.recs {
		b := bytesAt(p)
		for _, off := range [...]int{offLease, offRenewed, offExpires} {
			code := le.Uint32(b[off+12:])
			if code < locBase {
				continue
			}
			n, ok := renum[code]
			if !ok {
				n = locBase + uint32(len(locs))
				locs = append(locs, s.locs[code-locBase])
				renum[code] = n
			}
			le.PutUint32(b[off+12:], n)
		}
	}
	clear(s.locIx)
	for i, l := range locs {
		s.locIx[l] = uint32(i)
	}
	s.locs, s.locsLive = locs, len(locs)
}

// getTime reads the time putTime wrote at b's start.
func (s *Store) getTime(b []byte) time.Time {
	code := le.Uint32(b[12:])
	if code == locZero {
		return time.Time{}
	}
	t := time.Unix(int64(le.Uint64(b)), int64(le.Uint32(b[8:])))
	switch code {
	case locUTC:
		return t.UTC()
	case locLocal:
		return t
	default:
		return t.In(s.locs[code-locBase])
	}
}

// head returns the record b holds without its response.
func (s *Store) head(b []byte) idem.Record {
	return idem.Record{
		ID:            str(b, sID),
		Digest:        str(b, sDigest),
		State:         idem.State(str(b, sState)),
		Owner:         str(b, sOwner),
		LeaseExpires:  s.getTime(b[offLease:]),
		Renewed:       s.getTime(b[offRenewed:]),
		Attempt:       int(int64(le.Uint64(b[offAttempt:]))),
		RequestID:     str(b, sRequestID),
		RawBodySHA256: str(b, sRawBodySHA256),
		Expires:       s.getTime(b[offExpires:]),
	}
}

// record returns the caller's copy of the record b holds.
func (s *Store) record(b []byte) idem.Record {
	r := s.head(b)
	r.Response = response(b)
	return r
}

// expired reports whether record b's retention has ended at now.
func (s *Store) expired(b []byte, now time.Time) bool {
	if le.Uint32(b[offExpires+12:]) == locZero {
		return false
	}
	return !now.Before(s.getTime(b[offExpires:]))
}

// A response is written as: status (int64), NotKept (int64), whether it
// had a header map (1 byte), the body (its length, uint32, then its
// bytes), then the number of headers (uint32) and each header's name
// (length and bytes), its number of values and each value (length and
// bytes). Response header order is the map's: nothing reads it in order.

// responseLen returns the bytes appendResponse writes for r.
func responseLen(r *idem.Response) int {
	if r == nil {
		return 0
	}
	n := 8 + 8 + 1 + 4 + len(r.Body) + 4
	for name, vs := range r.Headers {
		n += 4 + len(name) + 4
		for _, v := range vs {
			n += 4 + len(v)
		}
	}
	return n
}

// appendResponse writes r (nil: none) at b's end, which has room for it,
// and references it.
func appendResponse(b []byte, r *idem.Response) {
	if r == nil {
		le.PutUint64(b[offResp:], 0)
		return
	}
	start := used(b)
	w := b[start:start]
	w = le.AppendUint64(w, uint64(int64(r.Status)))
	w = le.AppendUint64(w, uint64(int64(r.NotKept)))
	if r.Headers != nil {
		w = append(w, 1)
	} else {
		w = append(w, 0)
	}
	w = appendBytes(w, r.Body)
	w = le.AppendUint32(w, uint32(len(r.Headers)))
	for name, vs := range r.Headers {
		w = appendBytes(w, unsafe.Slice(unsafe.StringData(name), len(name)))
		w = le.AppendUint32(w, uint32(len(vs)))
		for _, v := range vs {
			w = appendBytes(w, unsafe.Slice(unsafe.StringData(v), len(v)))
		}
	}
	le.PutUint32(b[offResp:], uint32(start))
	le.PutUint32(b[offResp+4:], uint32(len(w)))
	le.PutUint32(b[offUsed:], uint32(start+len(w)))
}

func appendBytes(w, p []byte) []byte {
	return append(le.AppendUint32(w, uint32(len(p))), p...)
}

// responseCopy is a copied response with room for the header values of a
// typical response, so that copying one takes one allocation fewer.
type responseCopy struct {
	resp   idem.Response
	values [4]string
}

// response returns a copy of record b's response that is the caller's
// (nil for none): its body and header lists are its own; names and
// values are views of b's bytes, which are never written again.
func response(b []byte) *idem.Response {
	off, n := le.Uint32(b[offResp:]), le.Uint32(b[offResp+4:])
	if n == 0 {
		return nil
	}
	r := b[off : off+n]
	box := &responseCopy{}
	c := &box.resp
	c.Status = int(int64(le.Uint64(r)))
	c.NotKept = int(int64(le.Uint64(r[8:])))
	headers := r[16] == 1
	r = r[17:]
	var body []byte
	body, r = readBytes(r)
	c.Body = append([]byte(nil), body...)
	nh := le.Uint32(r)
	r = r[4:]
	if !headers {
		return c
	}
	c.Headers = make(map[string][]string, nh)
	free := box.values[:0:len(box.values)]
	for range nh {
		var name []byte
		name, r = readBytes(r)
		nv := int(le.Uint32(r))
		r = r[4:]
		var vs []string // nil for no value
		switch {
		case nv == 0:
		case nv <= cap(free)-len(free):
			vs = free[len(free) : len(free) : len(free)+nv]
			free = free[:len(free)+nv]
		default:
			vs = make([]string, 0, nv)
		}
		for range nv {
			var v []byte
			v, r = readBytes(r)
			vs = append(vs, view(v))
		}
		if vs != nil {
			vs = vs[:len(vs):len(vs)]
		}
		c.Headers[view(name)] = vs
	}
	return c
}

func readBytes(r []byte) (p, rest []byte) {
	n := le.Uint32(r)
	return r[4 : 4+n], r[4+n:]
}

// view returns p's bytes as a string (p is never written again).
func view(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	return unsafe.String(&p[0], len(p))
}
