// Package respsize measures a response as the idempotency stores keep it,
// so that every store keeps the same responses and refuses the same ones.
package respsize

// Room is what the stored form of a response may hold beyond the body
// limit (idem.MaxResponseBytes): its status, headers and framing.
const Room = 1 << 20

// Max is the largest stored form a store keeps: the body limit (Lambda's
// 6 MB, idem.MaxResponseBytes) and Room.
const Max = 6<<20 + Room

// Encoded is the size of a response's stored form: a format byte, the
// status and the header count as varints, then per header its name and
// its value count, and per value the value, each string after its length
// as a varint, then the body. idem/dynamostore encodes a response exactly
// so (before deflating it).
func Encoded(status int, headers map[string][]string, body int) int {
	n := 1 + uvarintLen(uint64(status)) + uvarintLen(uint64(len(headers))) + body
	for k, vs := range headers {
		n += uvarintLen(uint64(len(k))) + len(k) + uvarintLen(uint64(len(vs)))
		for _, v := range vs {
			n += uvarintLen(uint64(len(v))) + len(v)
		}
	}
	return n
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
