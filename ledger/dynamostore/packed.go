package dynamostore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/semantic"
)

// The compact record layout. A record item carries as top-level attributes
// only what DynamoDB itself reads: the keys (pk, sk), the byRun index key
// (runKey), the TTL attribute (expiresAt) and the attributes a write's
// condition tests (owner, attempt, state, expiresAtMs, leaseUntil, fence;
// fence omitted when 0, which every fence condition reads as 0). Everything
// else the ledger reads — identity stamps, provider key, outcome, attempt
// rows, bookkeeping times — is one binary attribute, PackedAttribute, in the
// packed encoding below. Each ledger write is a whole-record PutItem, so
// what it costs the engine to parse, store and compare grows with the
// attribute count: the previous layout, with every attempt a map of up to
// ten attributes, sent 19-20 top-level attributes and a nested list
// (docs/performance-history.md).
//
// The condition attributes keep the names of the previous layout, so a
// record written in it is read (decodeLegacy) and fenced by the same
// conditions, and the first write of this version replaces it with the
// compact layout.
const packedVersion = 1

// PackedAttribute is the binary attribute of a record item holding every
// field that is not a key, index, TTL or condition attribute, in the packed
// encoding (read it with DecodeRecord).
const PackedAttribute = "d"

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
	av[PackedAttribute] = &types.AttributeValueMemberB{Value: pack(r)}
	return av
}

// pack is the packed encoding: a version byte, then the fields in a fixed
// order. A string is a uvarint header h and, when h is even, h/2 bytes;
// an odd h stands for the (h-1)/2-th of a few values the decoder already
// knows at that point (the well-known kinds, keyings, recipes and states,
// the effect id within the key, the tenant and the rest within the effect
// id, the run, node and invocation of the record or the previous attempt), so what repeats across
// fields is stored once. Counts are uvarints; a time is a uvarint, 0 for
// the zero time, else the zigzag offset in milliseconds from a base (0 for
// CreatedAt, CreatedAt for the others), plus one.
func pack(r *ledger.Record) []byte {
	b := make([]byte, 0, 96+len(r.ProviderKey)+len(r.RequestDigest)+48*len(r.Attempts)+outcomeLen(r.Outcome))
	b = append(b, packedVersion)
	k := refsOf(r)
	b = appendRef(b, string(r.Kind), kinds[:]...)
	b = appendRef(b, r.EffectID, k.effectID)
	b = appendRef(b, r.Tenant, tenantOf(r.EffectID))
	b = appendRef(b, string(r.Keying), keyings[:]...)
	b = appendRef(b, r.IdentityRecipe, recipes[:]...)
	b = appendRef(b, r.SemanticRecipe, semanticRecipes[:]...)
	b = appendRef(b, r.RequestDigest)
	b = appendRef(b, r.ProviderKey)
	b = binary.AppendUvarint(b, uint64(r.MaxAttempts))
	b = appendTime(b, r.CreatedAt, 0)
	base := baseOf(r.CreatedAt)
	b = appendTime(b, r.UpdatedAt, base)
	b = appendTime(b, r.Deadline, base)
	b = appendTime(b, r.NotBefore, base)
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
		b = appendRef(b, string(o.Value))
		b = appendRef(b, o.Error)
		b = appendRef(b, o.BodyDigest)
		b = binary.AppendVarint(b, o.BodySize)
	}
	b = binary.AppendUvarint(b, uint64(len(r.Attempts)))
	var prev ledger.Attempt
	for _, a := range r.Attempts {
		b = binary.AppendUvarint(b, uint64(a.N))
		b = appendRef(b, string(a.State), attemptStates[:]...)
		b = appendTime(b, a.At, base)
		if a.Fired {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = appendTime(b, a.FiredAt, base)
		b = appendRef(b, a.RunID, r.RunID, prev.RunID)
		b = appendRef(b, a.NodeID, prev.NodeID)
		b = appendRef(b, a.InvocationID, prev.InvocationID, opaqueOf(r.EffectID))
		b = appendRef(b, a.Operator)
		b = appendRef(b, a.Note)
		prev = a
	}
	return b
}

// The well-known values a packed string may name instead of spelling out.
// Append only: a value's position is part of the stored encoding.
var (
	kinds           = [...]string{string(identity.KindEffect), string(identity.KindSlot)}
	keyings         = [...]string{string(identity.KeyingActivityRecipe), string(identity.KeyingBusinessIdentity)}
	recipes         = [...]string{identity.ActivityRecipe, identity.BusinessRecipe}
	semanticRecipes = [...]string{semantic.RecipeV2}
	attemptStates   = [...]string{string(ledger.AttemptClaimed), string(ledger.AttemptCompleted),
		string(ledger.AttemptReleased), string(ledger.AttemptEscaped)}
)

type refs struct{ effectID string }

// refsOf is what the decoder knows from the top-level attributes.
func refsOf(r *ledger.Record) refs {
	return refs{effectID: strings.TrimPrefix(r.Key, effectPrefix)}
}

const effectPrefix = "effect#"

func tenantOf(effectID string) string {
	t, _, _ := strings.Cut(effectID, "/")
	return t
}

// opaqueOf is the part of an effect id after the tenant (the activity
// identity's invocation id).
func opaqueOf(effectID string) string {
	_, o, _ := strings.Cut(effectID, "/")
	return o
}

func baseOf(created time.Time) int64 {
	if created.IsZero() {
		return 0
	}
	return ms(created)
}

func outcomeLen(o *ledger.Outcome) int {
	if o == nil {
		return 0
	}
	return len(o.Value) + len(o.Error) + len(o.BodyDigest)
}

func appendRef(b []byte, s string, known ...string) []byte {
	for i, k := range known {
		if k != "" && s == k {
			return binary.AppendUvarint(b, uint64(i)<<1|1)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(s))<<1)
	return append(b, s...)
}

func appendTime(b []byte, t time.Time, base int64) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	d := ms(t) - base
	return binary.AppendUvarint(b, uint64(d<<1^d>>63)+1)
}

// decodeItem decodes a compact item; ok is false when av is not one (a
// record in the previous layout).
func decodeItem(av map[string]types.AttributeValue) (r *ledger.Record, ok bool, err error) {
	d, ok := av[PackedAttribute].(*types.AttributeValueMemberB)
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
	if beside := len(d.Value) > 0 && d.Value[0] == packedVersionBeside; beside != (valueRefOf(av) != "") {
		return nil, true, fmt.Errorf("%w: value reference and version disagree", errPacked)
	}
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

func (x *reader) uvarint() uint64 { return readVarint(x, binary.Uvarint) }

func (x *reader) varint() int64 { return readVarint(x, binary.Varint) }

// readVarint reads one number with decode (binary.Uvarint or binary.Varint).
func readVarint[T uint64 | int64](x *reader, decode func([]byte) (T, int)) T {
	v, n := decode(x.b)
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

// ref reads a string written by appendRef with the same known values.
func (x *reader) ref(known ...string) string {
	h := x.uvarint()
	if h&1 == 1 {
		if i := h >> 1; i < uint64(len(known)) && known[i] != "" {
			return known[i]
		}
		x.fail()
		return ""
	}
	if h>>1 > uint64(len(x.b)) {
		x.fail()
		return ""
	}
	v := string(x.b[:h>>1])
	x.b = x.b[h>>1:]
	return v
}

// int reads a uvarint that must fit an int (counts, attempt numbers).
func (x *reader) int() int {
	v := x.uvarint()
	if v > 1<<31 {
		x.fail()
		return 0
	}
	return int(v)
}

func (x *reader) time(base int64) time.Time {
	v := x.uvarint()
	if v == 0 {
		return time.Time{}
	}
	v--
	return fromMs(int64(v>>1) ^ -int64(v&1) + base)
}

func unpack(b []byte, r *ledger.Record) error {
	if len(b) == 0 || b[0] != packedVersion && b[0] != packedVersionBeside {
		return fmt.Errorf("%w: unknown version", errPacked)
	}
	x := &reader{b: b[1:]}
	k := refsOf(r)
	r.Kind = identity.Kind(x.ref(kinds[:]...))
	r.EffectID = x.ref(k.effectID)
	r.Tenant = x.ref(tenantOf(r.EffectID))
	r.Keying = identity.Keying(x.ref(keyings[:]...))
	r.IdentityRecipe = x.ref(recipes[:]...)
	r.SemanticRecipe = x.ref(semanticRecipes[:]...)
	r.RequestDigest, r.ProviderKey = x.ref(), x.ref()
	r.MaxAttempts = x.int()
	r.CreatedAt = x.time(0)
	base := baseOf(r.CreatedAt)
	r.UpdatedAt, r.Deadline, r.NotBefore = x.time(base), x.time(base), x.time(base)
	if f := x.byte(); f&pkOutcome != 0 {
		o := &ledger.Outcome{OK: f&pkOK != 0, Streamed: f&pkStreamed != 0, Dropped: f&pkDropped != 0}
		if v := x.ref(); v != "" {
			o.Value = []byte(v)
		}
		o.Error, o.BodyDigest, o.BodySize = x.ref(), x.ref(), x.varint()
		r.Outcome = o
	}
	n := x.int()
	if n > len(x.b) { // every row takes at least one byte
		x.fail()
	}
	if n > 0 && x.err == nil {
		r.Attempts = make([]ledger.Attempt, n)
		var prev ledger.Attempt
		for i := range r.Attempts {
			a := &r.Attempts[i]
			a.N = x.int()
			a.State = ledger.AttemptState(x.ref(attemptStates[:]...))
			a.At = x.time(base)
			a.Fired = x.byte() == 1
			a.FiredAt = x.time(base)
			a.RunID = x.ref(r.RunID, prev.RunID)
			a.NodeID = x.ref(prev.NodeID)
			a.InvocationID = x.ref(prev.InvocationID, opaqueOf(r.EffectID))
			a.Operator, a.Note = x.ref(), x.ref()
			prev = *a
		}
	}
	if x.err == nil && len(x.b) != 0 {
		x.fail()
	}
	return x.err
}
