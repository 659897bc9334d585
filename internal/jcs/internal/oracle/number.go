package oracle

import (
	"math"
	"strconv"
)

// AppendNumber appends f as ECMAScript's Number.prototype.toString writes it
// (the JCS number form) and reports ErrNumber for NaN and ±Inf, which have no
// JSON form (dst is then returned unchanged).
//
// The rules: 0 and -0 are "0"; magnitudes in [1e-6, 1e21) are written in
// positional notation with the shortest digit string that round-trips;
// others as d[.ddd]e±n with the shortest digits and no exponent padding
// ("1e+21", "1e-7", "5e-324").
func AppendNumber(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, ErrNumber
	}
	return appendES(dst, f), nil
}

// appendES writes a finite f in ECMAScript form.
func appendES(dst []byte, f float64) []byte {
	if f == 0 { // both +0 and -0
		return append(dst, '0')
	}
	abs := math.Abs(f)
	if abs >= 1e-6 && abs < 1e21 {
		// Go's shortest 'f' output is ECMAScript's for this range: the same
		// shortest round-trip digits (closest to the value), zero-padded
		// integers, "0.000001"-style fractions.
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	n := len(dst)
	dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
	// Go pads the exponent to two digits ("1e-07"); ECMAScript does not.
	for i := len(dst) - 1; i > n; i-- {
		if dst[i] == 'e' {
			// dst[i+1] is the sign; drop one leading zero of a two-digit
			// exponent (Go never writes more than one).
			if len(dst)-(i+2) == 2 && dst[i+2] == '0' {
				copy(dst[i+2:], dst[i+3:])
				dst = dst[:len(dst)-1]
			}
			break
		}
	}
	return dst
}

// number parses the JSON number at s.pos and appends its canonical form.
func (s *state) number() error {
	d := s.data
	start := s.pos
	i := start
	if i < len(d) && d[i] == '-' {
		i++
	}
	intStart := i
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i++
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return s.syntax(i, "invalid number: expected digit")
	}
	intDigits := i - intStart
	simple := true
	if i < len(d) && d[i] == '.' {
		simple = false
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return s.syntax(i, "invalid number: expected digit after decimal point")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		simple = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return s.syntax(i, "invalid number: expected digit in exponent")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	s.pos = i
	lit := d[start:i]
	// Fast path: an integer literal of at most 15 digits is exactly
	// representable (< 2^53) and ECMAScript writes it back unchanged,
	// except -0.
	if simple && intDigits <= 15 {
		if len(lit) == 2 && lit[0] == '-' && lit[1] == '0' {
			s.dst = append(s.dst, '0')
			return nil
		}
		s.dst = append(s.dst, lit...)
		return nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || math.IsInf(f, 0) {
		// The grammar was checked above, so the only failure is overflow.
		return s.fail(start, ErrNumber)
	}
	n := len(s.dst)
	s.dst = appendES(s.dst, f)
	if s.exact && !sameDecimal(lit, s.dst[n:]) {
		s.dst = s.dst[:n]
		return s.fail(start, ErrInexactNumber)
	}
	return nil
}

// sameDecimal reports whether two JSON number literals have the same
// decimal value.
func sameDecimal(a, b []byte) bool {
	an, ad, ae := decimal(a)
	bn, bd, be := decimal(b)
	if ad == "" || bd == "" {
		return ad == bd // zero, whatever its sign
	}
	return an == bn && ad == bd && ae == be
}

// decimal splits a JSON number literal into its sign, its significant
// digits (no leading or trailing zeros; "" for zero) and the exponent e of
// its value 0.digits × 10^e. The exponent saturates far outside any value
// an input that fits in memory can bring back into range.
func decimal(lit []byte) (neg bool, digits string, exp int64) {
	i := 0
	if i < len(lit) && lit[i] == '-' {
		neg = true
		i++
	}
	var ds []byte
	var intLen int64
	for ; i < len(lit) && lit[i] >= '0' && lit[i] <= '9'; i++ {
		ds = append(ds, lit[i])
		intLen++
	}
	if i < len(lit) && lit[i] == '.' {
		for i++; i < len(lit) && lit[i] >= '0' && lit[i] <= '9'; i++ {
			ds = append(ds, lit[i])
		}
	}
	var e int64
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		eneg := false
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			eneg = lit[i] == '-'
			i++
		}
		const limit = 1 << 50
		for ; i < len(lit); i++ {
			if e < limit {
				e = e*10 + int64(lit[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
	}
	exp = intLen + e
	lead := 0
	for lead < len(ds) && ds[lead] == '0' {
		lead++
	}
	exp -= int64(lead)
	ds = ds[lead:]
	for len(ds) > 0 && ds[len(ds)-1] == '0' {
		ds = ds[:len(ds)-1]
	}
	return neg, string(ds), exp
}
