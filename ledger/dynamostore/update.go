package dynamostore

import (
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/ledger"
)

// The narrow update of Store.Replace.
//
// A Replace used to write the whole record (1–1.5 KB) with a conditional
// PutItem; the fire mark, the heartbeat and the outcome change a handful of
// small attributes. Replace now sends one conditional UpdateItem carrying
// only what a Replace may change (ledger.Store documents what it may not):
//
//   - the same attempt of the same owner (the fire mark, a heartbeat
//     renewal, the outcome, a release, the close-out of a stalled attempt):
//     state (when it changes), lease, fence (when set), retention, updated
//     time, the current attempt's row (attempts[n-1], the other rows are
//     unchanged), the outcome (when recorded) and the retry schedule (when
//     set);
//   - a new attempt or a new owner (a reclaim, an operator's resolution):
//     every mutable attribute, the attempts list whole, and REMOVE of the
//     optional ones now unset.
//
// The record's identity (key, kind, effect identity and recipes, tenant,
// provider key, creating run, creation time) is never rewritten. The stream
// image of an UpdateItem is the whole item, as before.

// Attribute names of the update (#-placeholders are fixed per attribute).
var updNames = map[string]string{
	"#o": "owner", "#a": "attempt", "#s": "state", "#e": "expiresAtMs", "#l": "leaseUntil", "#f": "fence",
	"#t": "expiresAt", "#u": "updatedAt", "#A": "attempts", "#O": "outcome", "#N": "notBefore",
	"#M": "maxAttempts", "#D": "deadline",
}

// replaceUpdate returns the update expression and values of a Replace of
// the record matching want by next. values already holds the condition's
// values (":o", ":a", ":s", ":n", and ":f" when next.Fence > 0).
func replaceUpdate(next *ledger.Record, want ledger.Expect, values map[string]types.AttributeValue) string {
	var b strings.Builder
	b.Grow(160)
	b.WriteString("SET ")
	sep := false
	set := func(name, value string, av types.AttributeValue) {
		if sep {
			b.WriteString(", ")
		}
		sep = true
		b.WriteString(name)
		b.WriteString(" = ")
		b.WriteString(value)
		if av != nil {
			values[value] = av
		}
	}
	same := next.Attempt == want.Attempt && next.Owner == want.Owner
	if !same || string(next.State) != string(want.State) {
		set("#s", ":S", avS(string(next.State)))
	}
	if !same {
		set("#o", ":O", avS(next.Owner))
		set("#a", ":A", avN(int64(next.Attempt)))
	}
	set("#l", ":l", avN(ms(next.LeaseUntil)))
	if next.Fence > 0 {
		set("#f", ":f", nil) // the condition's :f
	}
	set("#u", ":u", avN(ms(next.UpdatedAt)))
	set("#e", ":e", avN(ms(next.ExpiresAt)))
	set("#t", ":t", avN((ms(next.ExpiresAt)+999)/1000))
	var remove []string
	if same {
		if n := len(next.Attempts); n > 0 {
			set("#A["+strconv.Itoa(n-1)+"]", ":r", attemptAV(&next.Attempts[n-1]))
		}
		if next.Outcome != nil {
			set("#O", ":c", outcomeAV(next.Outcome))
		}
		if !next.NotBefore.IsZero() {
			set("#N", ":b", avN(ms(next.NotBefore)))
		}
	} else {
		rows := make([]types.AttributeValue, len(next.Attempts))
		for i := range next.Attempts {
			rows[i] = attemptAV(&next.Attempts[i])
		}
		set("#A", ":r", &types.AttributeValueMemberL{Value: rows})
		if next.Outcome != nil {
			set("#O", ":c", outcomeAV(next.Outcome))
		} else {
			remove = append(remove, "#O")
		}
		if next.MaxAttempts != 0 {
			set("#M", ":m", avN(int64(next.MaxAttempts)))
		} else {
			remove = append(remove, "#M")
		}
		if !next.Deadline.IsZero() {
			set("#D", ":d", avN(ms(next.Deadline)))
		} else {
			remove = append(remove, "#D")
		}
		if !next.NotBefore.IsZero() {
			set("#N", ":b", avN(ms(next.NotBefore)))
		} else {
			remove = append(remove, "#N")
		}
	}
	if len(remove) > 0 {
		b.WriteString(" REMOVE ")
		b.WriteString(strings.Join(remove, ", "))
	}
	return b.String()
}

// replaceNames returns the placeholders the update and condition use: the
// shared map holds every one (DynamoDB refuses an unused name, so the map
// is cut down to those in expr).
func replaceNames(exprs ...string) map[string]string {
	m := make(map[string]string, 12)
	for _, e := range exprs {
		for i := 0; i < len(e); i++ {
			if e[i] != '#' || i+1 >= len(e) {
				continue
			}
			k := e[i : i+2]
			if v, ok := updNames[k]; ok {
				m[k] = v
			}
		}
	}
	return m
}

func avS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// attemptAV encodes one attempt row exactly as the item codec does
// (attributevalue on the attempt struct: omitempty fields left out).
func attemptAV(a *ledger.Attempt) types.AttributeValue {
	m := make(map[string]types.AttributeValue, 10)
	m["n"] = avN(int64(a.N))
	m["state"] = avS(string(a.State))
	m["at"] = avN(ms(a.At))
	m["fired"] = &types.AttributeValueMemberBOOL{Value: a.Fired}
	if !a.FiredAt.IsZero() {
		if v := ms(a.FiredAt); v != 0 {
			m["firedAt"] = avN(v)
		}
	}
	str := func(k, v string) {
		if v != "" {
			m[k] = avS(v)
		}
	}
	str("runId", a.RunID)
	str("nodeId", a.NodeID)
	str("invocationId", a.InvocationID)
	str("operator", a.Operator)
	str("note", a.Note)
	return &types.AttributeValueMemberM{Value: m}
}

// outcomeAV encodes an outcome exactly as the item codec does.
func outcomeAV(o *ledger.Outcome) types.AttributeValue {
	m := make(map[string]types.AttributeValue, 7)
	m["ok"] = &types.AttributeValueMemberBOOL{Value: o.OK}
	m["streamed"] = &types.AttributeValueMemberBOOL{Value: o.Streamed}
	if len(o.Value) > 0 {
		m["value"] = &types.AttributeValueMemberB{Value: o.Value}
	}
	if o.Error != "" {
		m["error"] = avS(o.Error)
	}
	if o.Dropped {
		m["dropped"] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if o.BodyDigest != "" {
		m["bodyDigest"] = avS(o.BodyDigest)
	}
	if o.BodySize != 0 {
		m["bodySize"] = avN(o.BodySize)
	}
	return &types.AttributeValueMemberM{Value: m}
}
