package jcs

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

// numberVerbatim reports whether the JSON number at d[i] is its own
// canonical form, and if so returns the offset after it: an integer of at
// most 15 digits (exactly a double, written back as it is; not -0), or a
// fraction without exponent that shortDecimal would write back unchanged
// (no trailing zero, at most 15 significant digits, at least 1e-6). Any
// other number, and anything that is not a number, is left to number.
func numberVerbatim(d []byte, i int) (int, bool) {
	j := i
	if d[j] == '-' {
		j++
	}
	k := j
	for k < len(d) && d[k]-'0' < 10 {
		k++
	}
	n := k - j
	if n == 0 || n > 15 || d[j] == '0' && n > 1 {
		return 0, false
	}
	if k < len(d) && d[k] == '.' {
		f := k + 1
		e := f
		for e < len(d) && d[e]-'0' < 10 {
			e++
		}
		if e == f || d[e-1] == '0' || e < len(d) && d[e]|0x20 == 'e' {
			return 0, false
		}
		if d[j] == '0' {
			z := f
			for d[z] == '0' {
				z++
			}
			if z-f > 5 || e-z > 15 {
				return 0, false
			}
		} else if n+e-f > 15 {
			return 0, false
		}
		return e, true
	}
	if k < len(d) && d[k]|0x20 == 'e' || d[j] == '0' && j != i {
		return 0, false
	}
	return k, true
}

// number parses the JSON number at d[start], appends its canonical form to
// dst, and returns dst and the offset after the number.
func (s *state) number(dst []byte, start int) ([]byte, int, error) {
	d := s.data
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
		return dst, i, s.syntax(i, "invalid number: expected digit")
	}
	intDigits := i - intStart
	simple := true
	dot := -1
	if i < len(d) && d[i] == '.' {
		simple = false
		dot = i
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return dst, i, s.syntax(i, "invalid number: expected digit after decimal point")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	hasExp := false
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		simple = false
		hasExp = true
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return dst, i, s.syntax(i, "invalid number: expected digit in exponent")
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	lit := d[start:i]
	// Fast path: an integer literal of at most 15 digits is exactly
	// representable (< 2^53) and ECMAScript writes it back unchanged,
	// except -0.
	if simple && intDigits <= 15 {
		if len(lit) == 2 && lit[0] == '-' && lit[1] == '0' {
			return append(dst, '0'), i, nil
		}
		return append(dst, lit...), i, nil
	}
	if dot >= 0 && !hasExp {
		if out, ok := shortDecimal(dst, lit, intStart-start, dot-start); ok {
			return out, i, nil
		}
	}
	if hasExp {
		if out, ok := shortExponent(dst, lit, intStart-start); ok {
			return out, i, nil
		}
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || math.IsInf(f, 0) {
		// The grammar was checked above, so the only failure is overflow.
		return dst, i, s.fail(start, ErrNumber)
	}
	n := len(dst)
	dst = appendES(dst, f)
	if s.exact && !sameDecimal(lit, dst[n:]) {
		return dst[:n], i, s.fail(start, ErrInexactNumber)
	}
	return dst, i, nil
}

// shortDecimal appends the canonical form of lit, a number literal with a
// fraction and no exponent whose integer part is lit[intStart:dot], to dst
// when it has at most 15 significant digits and a magnitude of 1e-6 or
// more (or is zero), and reports whether it did.
//
// Such a literal needs no float conversion: every decimal of up to 15
// significant digits round-trips through the nearest double (DBL_DIG), so
// two of them never share a double, and the shortest digit string that
// identifies the double is therefore the literal's own significant digits.
// ECMAScript writes those digits positionally for magnitudes in
// [1e-6, 1e21): the literal without trailing fraction zeros (and without
// the point when none remain). The value is unchanged, so the exact check
// of CanonicalizeExact holds too.
func shortDecimal(dst, lit []byte, intStart, dot int) ([]byte, bool) {
	intPart := lit[intStart:dot]
	frac := lit[dot+1:]
	for len(frac) > 0 && frac[len(frac)-1] == '0' {
		frac = frac[:len(frac)-1]
	}
	if len(intPart) == 1 && intPart[0] == '0' {
		if len(frac) == 0 { // 0.0, -0.000
			return append(dst, '0'), true
		}
		zeros := 0
		for frac[zeros] == '0' {
			zeros++
		}
		if zeros > 5 || len(frac)-zeros > 15 {
			return dst, false // below 1e-6 (exponent form), or too many digits
		}
	} else if len(intPart)+len(frac) > 15 {
		return dst, false
	}
	if len(frac) == 0 {
		return append(dst, lit[:dot]...), true // sign and integer part
	}
	return append(dst, lit[:dot+1+len(frac)]...), true
}

// shortExponent appends the canonical form of lit, a number literal with
// an exponent whose digits start at lit[intStart], to dst when it has at
// most 15 significant digits and a magnitude in [1e-6, 1e21) (or is zero),
// and reports whether it did. By the argument of shortDecimal those digits
// are the shortest that identify the double, so ECMAScript writes them
// positionally: "1e-3" is 0.001, "2.5E2" is 250, "1e20" is
// 100000000000000000000. The value is unchanged.
func shortExponent(dst, lit []byte, intStart int) ([]byte, bool) {
	var digits [15]byte
	k := 0     // significant digits kept
	zeros := 0 // zeros seen after the last kept digit
	point := 0 // digits before the point, counted from the first significant one
	seen := false
	intPart := true
	i := intStart
	for ; i < len(lit); i++ {
		c := lit[i]
		if c == '.' {
			intPart = false
			continue
		}
		if c == 'e' || c == 'E' {
			break
		}
		if c == '0' && !seen {
			if !intPart {
				point--
			}
			continue
		}
		seen = true
		if intPart {
			point++
		}
		if c == '0' {
			zeros++
			continue
		}
		if k+zeros+1 > len(digits) {
			return dst, false
		}
		for ; zeros > 0; zeros-- {
			digits[k] = '0'
			k++
		}
		digits[k] = c
		k++
	}
	if !seen {
		return append(dst, '0'), true // zero, whatever its sign and exponent
	}
	i++ // 'e' or 'E'
	neg := false
	if lit[i] == '+' || lit[i] == '-' {
		neg = lit[i] == '-'
		i++
	}
	for i < len(lit)-1 && lit[i] == '0' {
		i++
	}
	if len(lit)-i > 3 {
		return dst, false
	}
	exp := 0
	for ; i < len(lit); i++ {
		exp = exp*10 + int(lit[i]-'0')
	}
	if neg {
		exp = -exp
	}
	// The value is 0.digits × 10^p: its first significant digit is in the
	// place 10^(p-1), and 1e-6 <= |value| < 1e21 when -5 <= p <= 21.
	p := point + exp
	if p < -5 || p > 21 {
		return dst, false
	}
	if lit[0] == '-' {
		dst = append(dst, '-')
	}
	switch {
	case p >= k:
		dst = append(dst, digits[:k]...)
		for range p - k {
			dst = append(dst, '0')
		}
	case p > 0:
		dst = append(dst, digits[:p]...)
		dst = append(dst, '.')
		dst = append(dst, digits[p:k]...)
	default:
		dst = append(dst, '0', '.')
		for range -p {
			dst = append(dst, '0')
		}
		dst = append(dst, digits[:k]...)
	}
	return dst, true
}

// sameDecimal reports whether two JSON number literals have the same
// decimal value.
func sameDecimal(a, b []byte) bool {
	an, af, al, ae := decimal(a)
	bn, bf, bl, be := decimal(b)
	if af < 0 || bf < 0 {
		return af < 0 && bf < 0 // zero, whatever its sign
	}
	if an != bn || ae != be {
		return false
	}
	i, j := af, bf
	for {
		if a[i] == '.' {
			i++
		}
		if b[j] == '.' {
			j++
		}
		if a[i] != b[j] {
			return false
		}
		if i == al || j == bl {
			return i == al && j == bl
		}
		i++
		j++
	}
}

// decimal locates the significant digits of a JSON number literal: they
// are lit[first:last+1] with the decimal point, if it falls between them,
// skipped (first is -1 for zero). exp is the exponent e of the value
// 0.digits × 10^e; it saturates far outside any value an input that fits
// in memory can bring back into range.
func decimal(lit []byte) (neg bool, first, last int, exp int64) {
	i := 0
	if i < len(lit) && lit[i] == '-' {
		neg = true
		i++
	}
	first, last = -1, -1
	var intLen, lead int64
	digit := func(i int) {
		switch {
		case lit[i] != '0':
			if first < 0 {
				first = i
			}
			last = i
		case first < 0:
			lead++
		}
	}
	for ; i < len(lit) && lit[i] >= '0' && lit[i] <= '9'; i++ {
		digit(i)
		intLen++
	}
	if i < len(lit) && lit[i] == '.' {
		for i++; i < len(lit) && lit[i] >= '0' && lit[i] <= '9'; i++ {
			digit(i)
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
	return neg, first, last, intLen + e - lead
}
