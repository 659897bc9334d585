// Package itemsize is DynamoDB's item size and the capacity units it bills
// for it, by the rules of AWS's developer guide:
//
//   - "Strings are Unicode with UTF-8 binary encoding. The size of a string
//     is (number of UTF-8-encoded bytes of attribute name) + (number of
//     UTF-8-encoded bytes)"; binary values count their raw bytes; a number
//     is "approximately (number of UTF-8-encoded bytes of attribute name) +
//     (1 byte per two significant digits) + (1 byte)"; a BOOL or NULL is
//     one byte; a list or map is 3 bytes plus its elements, each one byte
//     more.
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

// Number is the size of a number attribute value written as s: one byte
// per two significant digits (leading and trailing zeros do not count),
// plus one.
func Number(s string) int {
	digits := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 'e' || c == 'E' {
			break
		}
		if c >= '0' && c <= '9' {
			digits = append(digits, c)
		}
	}
	i, j := 0, len(digits)
	for i < j && digits[i] == '0' {
		i++
	}
	for j > i && digits[j-1] == '0' {
		j--
	}
	return (j-i+1)/2 + 1
}
