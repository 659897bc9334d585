package dynamostore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/ledger"
)

// The compact record layout. A record item carries as top-level attributes
// only what DynamoDB itself reads: the keys (pk, sk), the byRun index key
// (runKey), the TTL attribute (expiresAt) and the attributes a write's
// condition tests (owner, attempt, state, expiresAtMs, leaseUntil, fence;
// fence omitted when 0, which every fence condition reads as 0). Everything
// else the ledger reads — identity stamps, provider key, outcome, attempt
// rows, bookkeeping times — is one binary attribute, packedAttr, in the
// packed encoding below. Each ledger write is a whole-record PutItem, so
// what it costs the engine to parse, store and compare grows with the
// attribute count: the previous layout, with every attempt a map of up to
// ten attributes, sent 19-20 top-level attributes and a nested list
// (docs/PERFORMANCE.md).
//
// The condition attributes keep the names of the previous layout, so a
// record written in it is read (decodeLegacy) and fenced by the same
// conditions, and the first write of this version replaces it with the
// compact layout.
const (
	packedAttr    = "d"
	packedVersion = 1
)

// Outcome flags of the packed encoding.
const (
	pkOutcome  = 1 << iota // an outcome follows
	pkOK                   // Outcome.OK
	pkStreamed             // Outcome.Streamed
	pkDropped              // Outcome.Dropped
)

// errPacked is the cause of every malformed packed attribute.
var errPacked = errors.New("dynamostore: malformed packed record")

// encodeItem returns the compact item of r (no reflection).
func encodeItem(r *ledger.Record) map[string]types.AttributeValue {
	exp := ms(r.ExpiresAt)
	av := make(map[string]types.AttributeValue, 11)
	av["pk"] = &types.AttributeValueMemberS{Value: r.Key}
	av["sk"] = &types.AttributeValueMemberS{Value: sortKey}
	if r.RunID != "" {
		av["runKey"] = &types.AttributeValueMemberS{Value: r.RunID}
	}
	av["state"] = &types.AttributeValueMemberS{Value: string(r.State)}
	av["owner"] = &types.AttributeValueMemberS{Value: r.Owner}
	av["attempt"] = avN(int64(r.Attempt))
	av["leaseUntil"] = avN(ms(r.LeaseUntil))
	if r.Fence != 0 {
		av["fence"] = &types.AttributeValueMemberN{Value: strconv.FormatUint(r.Fence, 10)}
	}
	av["expiresAtMs"] = avN(exp)
	av["expiresAt"] = avN((exp + 999) / 1000)
	av[packedAttr] = &types.AttributeValueMemberB{Value: pack(r)}
	return av
}

// pack is the packed encoding: a version byte, then the fields in a fixed
// order; strings and byte strings as a uvarint length and the bytes,
// counts as uvarints, times as varint Unix milliseconds (0: zero time).
func pack(r *ledger.Record) []byte {
	b := make([]byte, 0, 128+len(r.ProviderKey)+len(r.IdentityRecipe)+64*len(r.Attempts)+outcomeLen(r.Outcome))
	b = append(b, packedVersion)
	for _, s := range [...]string{string(r.Kind), r.EffectID, r.Tenant, string(r.Keying), r.IdentityRecipe,
		r.SemanticRecipe, r.RequestDigest, r.ProviderKey} {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, uint64(r.MaxAttempts))
	b = appendTime(b, r.Deadline)
	b = appendTime(b, r.NotBefore)
	b = binary.AppendVarint(b, ms(r.CreatedAt))
	b = binary.AppendVarint(b, ms(r.UpdatedAt))
	if o := r.Outcome; o == nil {
		b = append(b, 0)
	} else {
		f := byte(pkOutcome)
		if o.OK {
			f |= pkOK
		}
		if o.Streamed {
			f |= pkStreamed
		}
		if o.Dropped {
			f |= pkDropped
		}
		b = append(b, f)
		b = appendString(b, string(o.Value))
		b = appendString(b, o.Error)
		b = appendString(b, o.BodyDigest)
		b = binary.AppendVarint(b, o.BodySize)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Attempts)))
	for _, a := range r.Attempts {
		b = binary.AppendUvarint(b, uint64(a.N))
		b = appendString(b, string(a.State))
		b = binary.AppendVarint(b, ms(a.At))
		if a.Fired {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = appendTime(b, a.FiredAt)
		for _, s := range [...]string{a.RunID, a.NodeID, a.InvocationID, a.Operator, a.Note} {
			b = appendString(b, s)
		}
	}
	return b
}

func outcomeLen(o *ledger.Outcome) int {
	if o == nil {
		return 0
	}
	return len(o.Value) + len(o.Error) + len(o.BodyDigest)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	return binary.AppendVarint(b, ms(t))
}

// decodeItem decodes a compact item; ok is false when av is not one (a
// record in the previous layout).
func decodeItem(av map[string]types.AttributeValue) (r *ledger.Record, ok bool, err error) {
	d, ok := av[packedAttr].(*types.AttributeValueMemberB)
	if !ok {
		return nil, false, nil
	}
	r = &ledger.Record{}
	var exp int64
	for _, f := range []struct {
		name string
		s    *string
		n    *int64
	}{{name: "pk", s: &r.Key}, {name: "state", s: (*string)(&r.State)}, {name: "owner", s: &r.Owner}, {name: "expiresAtMs", n: &exp}} {
		if err := topLevel(av, f.name, f.s, f.n, true); err != nil {
			return nil, true, err
		}
	}
	if err := topLevel(av, "runKey", &r.RunID, nil, false); err != nil {
		return nil, true, err
	}
	var attempt, lease int64
	if err := topLevel(av, "attempt", nil, &attempt, true); err != nil {
		return nil, true, err
	}
	if err := topLevel(av, "leaseUntil", nil, &lease, true); err != nil {
		return nil, true, err
	}
	if n, ok := av["fence"].(*types.AttributeValueMemberN); ok {
		if r.Fence, err = strconv.ParseUint(n.Value, 10, 64); err != nil {
			return nil, true, fmt.Errorf("%w: fence: %v", errPacked, err)
		}
	}
	r.Attempt, r.LeaseUntil, r.ExpiresAt = int(attempt), fromMs(lease), fromMs(exp)
	if err := unpack(d.Value, r); err != nil {
		return nil, true, err
	}
	return r, true, nil
}

func topLevel(av map[string]types.AttributeValue, name string, s *string, n *int64, required bool) error {
	v, ok := av[name]
	if !ok {
		if required {
			return fmt.Errorf("%w: no %s", errPacked, name)
		}
		return nil
	}
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		if s != nil {
			*s = x.Value
			return nil
		}
	case *types.AttributeValueMemberN:
		if n != nil {
			var err error
			if *n, err = strconv.ParseInt(x.Value, 10, 64); err != nil {
				return fmt.Errorf("%w: %s: %v", errPacked, name, err)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: %s has type %T", errPacked, name, v)
}

// reader reads the packed encoding; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (x *reader) fail() {
	if x.err == nil {
		x.err = errPacked
	}
	x.b = nil
}

func (x *reader) uvarint() uint64 {
	v, n := binary.Uvarint(x.b)
	if n <= 0 {
		x.fail()
		return 0
	}
	x.b = x.b[n:]
	return v
}

func (x *reader) varint() int64 {
	v, n := binary.Varint(x.b)
	if n <= 0 {
		x.fail()
		return 0
	}
	x.b = x.b[n:]
	return v
}

func (x *reader) byte() byte {
	if len(x.b) == 0 {
		x.fail()
		return 0
	}
	c := x.b[0]
	x.b = x.b[1:]
	return c
}

func (x *reader) bytes() []byte {
	n := x.uvarint()
	if n > uint64(len(x.b)) {
		x.fail()
		return nil
	}
	v := x.b[:n:n]
	x.b = x.b[n:]
	return v
}

func (x *reader) string() string { return string(x.bytes()) }

// int reads a uvarint that must fit an int (counts, attempt numbers).
func (x *reader) int() int {
	v := x.uvarint()
	if v > 1<<31 {
		x.fail()
		return 0
	}
	return int(v)
}

func (x *reader) time() time.Time {
	if v := x.varint(); v != 0 {
		return fromMs(v)
	}
	return time.Time{}
}

func unpack(b []byte, r *ledger.Record) error {
	if len(b) == 0 || b[0] != packedVersion {
		return fmt.Errorf("%w: unknown version", errPacked)
	}
	x := &reader{b: b[1:]}
	r.Kind = ledger.Kind(x.string())
	r.EffectID, r.Tenant = x.string(), x.string()
	r.Keying = ledger.Keying(x.string())
	r.IdentityRecipe, r.SemanticRecipe, r.RequestDigest, r.ProviderKey = x.string(), x.string(), x.string(), x.string()
	r.MaxAttempts = x.int()
	r.Deadline, r.NotBefore = x.time(), x.time()
	r.CreatedAt, r.UpdatedAt = fromMs(x.varint()), fromMs(x.varint())
	if f := x.byte(); f&pkOutcome != 0 {
		o := &ledger.Outcome{OK: f&pkOK != 0, Streamed: f&pkStreamed != 0, Dropped: f&pkDropped != 0}
		if v := x.bytes(); len(v) > 0 {
			o.Value = append([]byte(nil), v...)
		}
		o.Error, o.BodyDigest, o.BodySize = x.string(), x.string(), x.varint()
		r.Outcome = o
	}
	n := x.int()
	if n > len(x.b) { // every row takes at least one byte
		x.fail()
	}
	if n > 0 && x.err == nil {
		r.Attempts = make([]ledger.Attempt, n)
		for i := range r.Attempts {
			a := &r.Attempts[i]
			a.N = x.int()
			a.State = ledger.AttemptState(x.string())
			a.At = fromMs(x.varint())
			a.Fired = x.byte() == 1
			a.FiredAt = x.time()
			a.RunID, a.NodeID, a.InvocationID, a.Operator, a.Note = x.string(), x.string(), x.string(), x.string(), x.string()
		}
	}
	if x.err == nil && len(x.b) != 0 {
		x.fail()
	}
	return x.err
}
