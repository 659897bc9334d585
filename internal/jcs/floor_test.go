package jcs

import (
	"encoding/binary"
	"math/bits"
	"testing"
)

// The two benchmarks in this file are not canonicalisers: they measure how
// fast a loop of the parse loop's kind can only step over rowsBody, so
// that the digest's figures can be read against a floor
// (docs/PERFORMANCE.md, "What bounds it").

// skim steps over the tokens of valid compact JSON with the parse loop's
// string scan and integer loop and nothing else: no nesting stack, no
// member records, no ordering, no output, no UTF-8 or grammar check. It
// returns the number of tokens.
func skim(d []byte) int {
	i, n := 0, 0
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			j := i + 1
			for {
				j = plainRun(d, j)
				if j >= len(d) || d[j] == '"' {
					break
				}
				if d[j] == '\\' {
					j += 2
				} else {
					j++
				}
			}
			i = j + 1
		case c-'0' < 10 || c == '-':
			i++
			for i < len(d) && (d[i]-'0' < 10 || d[i] == '.') {
				i++
			}
		case c == 't':
			i += 4
		default:
			i++
		}
		n++
	}
	return n
}

// BenchmarkFloorSkim1MB: skim over rowsBody, the floor of a one-pass
// token loop on that body.
func BenchmarkFloorSkim1MB(b *testing.B) {
	in := rowsBody(1 << 20)
	b.SetBytes(int64(len(in)))
	n := 0
	for b.Loop() {
		n = skim(in)
	}
	b.ReportMetric(float64(n), "tokens/op")
}

// eqBytes marks the high bit of every byte of w equal to c (and possibly
// of bytes above the lowest one marked; see notPlain).
func eqBytes(w uint64, c byte) uint64 {
	q := w ^ (lsb * uint64(c))
	return (q - lsb) &^ q
}

// structuralIndex writes the offset of every quote, backslash and
// structural byte ({ } [ ] : ,) of d to idx, eight bytes at a time: the
// first stage of a two-stage parser (index, then walk the index), alone.
// The offsets of a word after a false mark are not exact; the figure is
// what counts.
func structuralIndex(d []byte, idx []uint32) int {
	n := 0
	for i := 0; i+8 <= len(d); i += 8 {
		w := binary.LittleEndian.Uint64(d[i:])
		// '[' and '{' are the only bytes that read '{' with bit 5 set;
		// ']' and '}' the only ones that read '}'.
		u := w | lsb*0x20
		m := (eqBytes(w, '"') | eqBytes(w, '\\') | eqBytes(w, ':') | eqBytes(w, ',') |
			eqBytes(u, '{') | eqBytes(u, '}')) & msb
		for m != 0 {
			idx[n] = uint32(i + bits.TrailingZeros64(m)>>3)
			n++
			m &= m - 1
		}
	}
	return n
}

// BenchmarkFloorStructuralIndex1MB: structuralIndex over rowsBody.
func BenchmarkFloorStructuralIndex1MB(b *testing.B) {
	in := rowsBody(1 << 20)
	idx := make([]uint32, len(in))
	b.SetBytes(int64(len(in)))
	n := 0
	for b.Loop() {
		n = structuralIndex(in, idx)
	}
	b.ReportMetric(float64(n), "offsets/op")
}
