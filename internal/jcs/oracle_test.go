package jcs

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/jcs/internal/oracle"
)

// sameAsOracle fails t unless this package and the reference implementation
// (the previous byte-at-a-time canonicaliser, kept in internal/oracle) agree
// on in: the same canonical bytes, or the same error (message, sentinel and
// offset), for Canonicalize, CanonicalizeExact, Sum256, Sum256Exact and
// Sum256ExactCanonical, which says canonical only of its canonical form.
func sameAsOracle(t *testing.T, in []byte) {
	t.Helper()
	for _, exact := range []bool{false, true} {
		var got, want []byte
		var err, werr error
		if exact {
			got, err = CanonicalizeExact(in)
			want, werr = oracle.CanonicalizeExact(in)
		} else {
			got, err = Canonicalize(in)
			want, werr = oracle.Canonicalize(in)
		}
		if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) || !bytes.Equal(got, want) {
			t.Fatalf("exact=%v input %q:\n got %q, %v\nwant %q, %v", exact, in, got, err, want, werr)
		}
		var sum [sha256.Size]byte
		if exact {
			sum, err = Sum256Exact(in)
		} else {
			sum, err = Sum256(in)
		}
		if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) || (err == nil && sum != sha256.Sum256(want)) {
			t.Fatalf("Sum256 exact=%v input %q: %x, %v; want sha256 of %q, %v", exact, in, sum, err, want, werr)
		}
		if exact {
			// Reported canonical only when the input is its canonical form.
			csum, canonical, cerr := Sum256ExactCanonical(in)
			if (cerr == nil) != (werr == nil) || (cerr == nil && csum != sum) || (canonical && !bytes.Equal(in, want)) {
				t.Fatalf("Sum256ExactCanonical input %q: %x, %v, %v; want %x, canonical form %q, %v", in, csum, canonical, cerr, sum, want, werr)
			}
		}
	}
}

// FuzzAgainstOracle: for any input, the streaming canonicaliser and digest
// agree with the reference implementation, errors included.
func FuzzAgainstOracle(f *testing.F) {
	for _, s := range []string{
		`{"b":[1,2.50,"x\u0041"],"a":{"d":null,"c":true}}`,
		`{"id":1,"name":"row \u00e9 1","v":[1.5,2,"x"],"ok":true}`,
		`[{"b":1,"a":2},{"d":[0.000001,0.0000001,-0.0,123456789012345.6]}]`,
		`{"\ue000":1,"\ud83d\ude02":2,"a":3,"\u00e9":4}`,
		`{"a":1,"b":2,"a":3}`,
		`["0123456789abcdef\"\\/\b\f\n\r\t\u0001 long plain ascii text ~"]`,
		`{"x":1e21,"y":1.0e-7,"z":12345678901234567890,"w":0.1000000000000000000001}`,
		`["\u00e9\u07FF\u0800\uFFFF\ud7ff\ue000\u0080\u007f","abcdefg\u00e9","\u00e","\u00g9"]`,
		`[1.5,12345678.25,1234567890123.45,123456789012345.6,1.50,1.5e3,-1.5,12345678,123456789012345,1234567890123456]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { sameAsOracle(t, in) })
}

// TestAgainstOracleRandom compares with the reference implementation on
// generated JSON: nested objects with members in random order (names with
// escapes, non-ASCII and supplementary-plane characters), strings of every
// kind, and numbers from every formatting range. A fixed seed keeps it
// reproducible; failures print the input.
func TestAgainstOracleRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(8785, 1))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		var b bytes.Buffer
		genValue(r, &b, 0)
		sameAsOracle(t, b.Bytes())
		// The same text with a duplicate name or a broken tail.
		in := b.Bytes()
		if i := bytes.LastIndexByte(in, '}'); i > 0 && r.IntN(4) == 0 {
			sameAsOracle(t, append(append([]byte(nil), in[:i]...), `,"a":1,"a":2}`...))
		}
		if len(in) > 2 && r.IntN(4) == 0 {
			sameAsOracle(t, in[:r.IntN(len(in))])
		}
	}
}

var genNames = []string{"a", "b", "id", "name", "v", "ok", "\\u0061", "é", "\\u00e9x", "\ue000", "😂", "\\ud83d\\ude02", "€", "a\\nb", "", "aa", "ab", "zz", "Z", "\\\"q", "1"}

func genValue(r *rand.Rand, b *bytes.Buffer, depth int) {
	k := r.IntN(10)
	if depth > 5 {
		k = 4 + r.IntN(6)
	}
	switch {
	case k < 2:
		b.WriteByte('{')
		used := map[string]bool{}
		for i, m := 0, r.IntN(8); i < m; i++ {
			name := genNames[r.IntN(len(genNames))]
			if used[name] {
				continue
			}
			used[name] = true
			if b.Bytes()[b.Len()-1] != '{' {
				b.WriteString(ws(r) + ",")
			}
			b.WriteString(ws(r) + `"` + name + `"` + ws(r) + ":" + ws(r))
			genValue(r, b, depth+1)
		}
		b.WriteString(ws(r) + "}")
	case k < 4:
		b.WriteByte('[')
		for i, m := 0, r.IntN(6); i < m; i++ {
			if i > 0 {
				b.WriteString(ws(r) + ",")
			}
			b.WriteString(ws(r))
			genValue(r, b, depth+1)
		}
		b.WriteString(ws(r) + "]")
	case k < 7:
		b.WriteString(genNumber(r))
	case k < 9:
		b.WriteString(genString(r))
	default:
		b.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
	}
}

func ws(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return []string{" ", "\n  ", "\t", "\r\n"}[r.IntN(4)]
	}
	return ""
}

func genString(r *rand.Rand) string {
	parts := []string{"plain ascii text ", "x", "é", "€", "😂", "\\n", "\\u00e9", "\\ud83d\\ude02", "\\\"", "\\\\", "\\/", "\\u001f", "\\b", "<&>", "\u2028", "0123456789abcdef"}
	var s strings.Builder
	s.WriteByte('"')
	for i, m := 0, r.IntN(8); i < m; i++ {
		s.WriteString(parts[r.IntN(len(parts))])
	}
	s.WriteByte('"')
	return s.String()
}

func genNumber(r *rand.Rand) string {
	switch r.IntN(8) {
	case 0:
		return strconv.Itoa(r.IntN(2000) - 1000)
	case 1: // short fractions, trailing zeros, leading zeros, negative zero
		sign := []string{"", "-"}[r.IntN(2)]
		frac := strconv.Itoa(r.IntN(100000))
		return sign + strconv.Itoa(r.IntN(1000)) + "." + strings.Repeat("0", r.IntN(7)) + frac + strings.Repeat("0", r.IntN(3))
	case 2: // 14 to 17 significant digits around the fast-path bound
		digits := 14 + r.IntN(4)
		var s strings.Builder
		for i := range digits {
			if i == 0 {
				s.WriteByte(byte('1' + r.IntN(9)))
			} else {
				s.WriteByte(byte('0' + r.IntN(10)))
			}
		}
		d := s.String()
		p := r.IntN(len(d)) + 1
		if r.IntN(3) == 0 {
			return "0." + strings.Repeat("0", r.IntN(8)) + d
		}
		return d[:p] + "." + d[p:] + "0"
	case 3: // exponents
		return strconv.Itoa(r.IntN(100)) + []string{"e", "E", "e+", "e-"}[r.IntN(4)] + strconv.Itoa(r.IntN(30))
	case 4: // out of range or inexact
		return []string{"1e400", "-1e309", "1e-400", "12345678901234567890", "0.1000000000000000000001", "9007199254740993"}[r.IntN(6)]
	default:
		return strconv.FormatFloat(r.NormFloat64()*float64(r.IntN(1000000)), 'g', -1, 64)
	}
}

// TestShortDecimal checks the float-free path for fractions of up to 15
// significant digits against parse-then-format (whose output is checked
// against ECMAScript in TestNumbersAgainstECMAScript), across the range
// boundaries: 15 and 16 digits, 1e-6 and 1e-7, negative zero.
func TestShortDecimal(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 17))
	check := func(lit string) {
		t.Helper()
		got, err := Canonicalize([]byte(lit))
		f, perr := strconv.ParseFloat(lit, 64)
		if err != nil || perr != nil {
			t.Fatalf("%s: %v %v", lit, err, perr)
		}
		if want := appendES(nil, f); string(got) != string(want) {
			t.Fatalf("Canonicalize(%s) = %s, want %s", lit, got, want)
		}
	}
	for _, lit := range []string{"0.0", "-0.0", "-0.000", "0.000001", "0.0000010", "0.0000001", "-0.000001", "1.0", "-1.50",
		"123456789012345.0", "12345678901234.5", "1234567890123456.0", "0.123456789012345", "0.1234567890123456", "0.000001234567890123456",
		"999999999999999.9", "0.999999999999999", "9007199254740993.0", "100.000", "1.000000000000001"} {
		check(lit)
	}
	for range 200000 {
		var s strings.Builder
		if r.IntN(2) == 0 {
			s.WriteByte('-')
		}
		if r.IntN(3) == 0 {
			s.WriteString("0.")
			s.WriteString(strings.Repeat("0", r.IntN(8)))
		} else {
			s.WriteByte(byte('1' + r.IntN(9)))
			for range r.IntN(16) {
				s.WriteByte(byte('0' + r.IntN(10)))
			}
			s.WriteByte('.')
		}
		for range 1 + r.IntN(17) {
			s.WriteByte(byte('0' + r.IntN(10)))
		}
		check(s.String())
	}
}

// TestShortExponent checks the float-free path for literals with an
// exponent and at most 15 significant digits against parse-then-format,
// across the positional range's bounds (1e-6 and 1e-7, 1e20 and 1e21),
// 15 and 16 digits, zeros and leading and trailing zeros.
func TestShortExponent(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 6))
	check := func(lit string) {
		t.Helper()
		got, err := Canonicalize([]byte(lit))
		f, perr := strconv.ParseFloat(lit, 64)
		if err != nil || perr != nil {
			t.Fatalf("%s: %v %v", lit, err, perr)
		}
		if want := appendES(nil, f); string(got) != string(want) {
			t.Fatalf("Canonicalize(%s) = %s, want %s", lit, got, want)
		}
		exact, err := CanonicalizeExact([]byte(lit))
		if sameDecimal([]byte(lit), got) {
			if err != nil || string(exact) != string(got) {
				t.Fatalf("CanonicalizeExact(%s) = %s, %v; want %s", lit, exact, err, got)
			}
		} else if !errors.Is(err, ErrInexactNumber) {
			t.Fatalf("CanonicalizeExact(%s) = %s, %v; want ErrInexactNumber", lit, exact, err)
		}
	}
	for _, lit := range []string{"1e-3", "1E-3", "-1e-3", "1e-6", "1e-7", "1e20", "1e21", "1e+20", "1E+21", "0e5", "-0e-5", "0.0e10",
		"0.00012e2", "12.5e-1", "123456789012345e6", "123456789012345e7", "1234567890123456e0", "1.5e0", "100e-2", "1000e-9",
		"0.000001e0", "0.0000001e0", "10e-7", "9.99999999999999e20", "25e-8", "1e00000000000000000001", "1e-0000000000000000007"} {
		check(lit)
	}
	for range 200000 {
		var s strings.Builder
		if r.IntN(2) == 0 {
			s.WriteByte('-')
		}
		if r.IntN(4) == 0 {
			s.WriteString("0")
		} else {
			s.WriteByte(byte('1' + r.IntN(9)))
			for range r.IntN(16) {
				s.WriteByte(byte('0' + r.IntN(10)))
			}
		}
		if r.IntN(2) == 0 {
			s.WriteByte('.')
			for range 1 + r.IntN(17) {
				s.WriteByte(byte('0' + r.IntN(10)))
			}
		}
		s.WriteString([]string{"e", "E", "e+", "e-", "E-"}[r.IntN(5)])
		s.WriteString(strconv.Itoa(r.IntN(30)))
		check(s.String())
	}
}
