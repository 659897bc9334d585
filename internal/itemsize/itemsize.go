// Package itemsize is DynamoDB's item size and the capacity units it bills
// for it, by the rules of AWS's developer guide, with a number's size as
// DynamoDB Local (AWS's own engine) and dynalite bill it:
//
//   - "Strings are Unicode with UTF-8 binary encoding. The size of a string
//     is (number of UTF-8-encoded bytes of attribute name) + (number of
//     UTF-8-encoded bytes)"; binary values count their raw bytes; a number
//     is, in the guide's words, "approximately (number of UTF-8-encoded
//     bytes of attribute name) + (1 byte per two significant digits) + (1
//     byte)": exactly, its digits are stored in pairs aligned on the
//     decimal point, and a negative number takes a byte more (Number; the
//     engines' own bills are checked in TestNumberSizesAreTheEngines); a
//     BOOL or NULL is one byte; a list or map is 3 bytes plus its
//     elements, each one byte more.
//   - "One write capacity unit represents one write per second for an item
//     up to 1 KB in size": a write is billed per started KB, at least one
//     unit (a transactional write twice that).
//   - "One read capacity unit represents one strongly consistent read per
//     second ... for an item up to 4 KB in size": a consistent read is
//     billed per started 4 KB, at least one unit (an eventually consistent
//     read half that).
//
// Which item a write is billed for is stated two ways in AWS's guide over
// time: the larger of the item before and after the write (PutItem,
// UpdateItem), and, for a write whose condition fails, the existing item's
// size. Callers that report units compute both (see bench/compare and the
// cost tests of idem/dynamostore and ledger/dynamostore).
package itemsize

import "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

// WriteUnit and ReadUnit are the bytes one write capacity unit and one
// strongly consistent read capacity unit cover.
const (
	WriteUnit = 1024
	ReadUnit  = 4096
)

// Of returns the size of item in bytes by DynamoDB's rules.
func Of(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + value(v)
	}
	return n
}

// WriteUnits is the write capacity units of a write billed for an item of
// size bytes: started KB, at least 1.
func WriteUnits(size int) int { return max(1, (size+WriteUnit-1)/WriteUnit) }

// ReadUnits is the read capacity units of a strongly consistent read of an
// item of size bytes: started 4 KB, at least 1 (a read of an absent item
// costs 1 as well).
func ReadUnits(size int) int { return max(1, (size+ReadUnit-1)/ReadUnit) }

func value(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return Number(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		return sum(v.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberNS:
		return sum(v.Value, Number)
	case *types.AttributeValueMemberBS:
		return sum(v.Value, func(b []byte) int { return len(b) })
	case *types.AttributeValueMemberL:
		return 3 + sum(v.Value, func(e types.AttributeValue) int { return value(e) + 1 })
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += len(k) + value(e) + 1
		}
		return n
	}
	return 0
}

func sum[E any](xs []E, size func(E) int) int {
	n := 0
	for _, x := range xs {
		n += size(x)
	}
	return n
}

// Number is the size of a number attribute value written as s, as
// DynamoDB Local (AWS's own engine) and dynalite store and bill it: its
// significant digits (leading and trailing zeros do not count) are kept in
// base-100 digits aligned on the decimal point, one byte each, plus one
// byte; a negative number takes one byte more, unless its digits fill the
// 20 base-100 digits 38 significant digits can take at most. So 12 and
// 1200 take 2 bytes, but 120 (01|20), 1.5 (01.50) and 0.012 (00.01|20)
// take 3, and -120 takes 4. AWS's guide gives "1 byte per two significant
// digits, plus 1 byte" as an approximation, which counts a number one
// byte short whenever its digit pairs straddle the decimal point's
// alignment (a time in milliseconds ending in one zero, say) and a
// negative one a byte more short. dynalite counts a negative number of 20
// base-100 digits one byte more than DynamoDB Local; Number follows
// DynamoDB Local. Zero takes one byte; text that is no number is counted
// as far as it reads as one.
func Number(s string) int {
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	// first and last are the indexes of the first and last non-zero
	// digits among the mantissa's digits, point the number of its digits
	// before the decimal point, exp the exponent.
	first, last, digits, point, exp := -1, -1, 0, -1, 0
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '1' && c <= '9':
			if first < 0 {
				first = digits
			}
			last = digits
			digits++
		case c == '0':
			digits++
		case c == '.' && point < 0:
			point = digits
		default:
			goto mantissaDone
		}
	}
mantissaDone:
	if point < 0 {
		point = digits
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		e, eneg := 0, false
		j := i + 1
		if j < len(s) && (s[j] == '-' || s[j] == '+') {
			eneg = s[j] == '-'
			j++
		}
		for ; j < len(s) && s[j] >= '0' && s[j] <= '9' && e < 1<<20; j++ {
			e = e*10 + int(s[j]-'0')
		}
		if eneg {
			e = -e
		}
		exp = e
	}
	if first < 0 {
		return 1
	}
	// The powers of ten of the first and last significant digits, and the
	// base-100 digits (pairs of powers 2k+1, 2k) they span.
	top := point - 1 - first + exp
	bottom := point - 1 - last + exp
	pairs := floorHalf(top) - floorHalf(bottom) + 1
	n := 1 + pairs
	if neg && pairs < 20 {
		n++
	}
	return n
}

// floorHalf is p/2 rounded down (toward minus infinity).
func floorHalf(p int) int {
	if p < 0 {
		return -((-p + 1) / 2)
	}
	return p / 2
}
