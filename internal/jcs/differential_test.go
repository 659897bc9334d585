package jcs

import (
	"fmt"
	"strings"
	"testing"
)

// TestEscapesAgainstOracle: every \u escape of the Basic Multilingual
// Plane, in lower and upper case hex, at every offset modulo eight, in a
// string value and in a member name, with escapes and non-ASCII text
// around it, gives the same bytes or error as the reference
// implementation; so do invalid hex digits at each position, lone and
// paired surrogates, and escapes cut off by the end of the input.
func TestEscapesAgainstOracle(t *testing.T) {
	step := 1
	if testing.Short() {
		step = 7
	}
	for r := 0; r <= 0xFFFF; r += step {
		pre := strings.Repeat("a", r%9)
		esc := fmt.Sprintf(`\u%04x`, r)
		if r%2 == 1 {
			esc = fmt.Sprintf(`\u%04X`, r)
		}
		after := []string{"", "b", "\\n", "é", esc, `\u00e9`, "0123456789"}[r%7]
		s := `"` + pre + esc + after + `"`
		sameAsOracle(t, []byte(s))
		sameAsOracle(t, []byte(`{"k":`+s+`,"a":[`+s+`]}`))
		sameAsOracle(t, []byte(`{`+s+`:1,"a":2}`))
	}
	for _, s := range []string{
		`"\u00e"`, `"\u00e9`, `"\u00`, `"\u`, `"\`, `"\u00g9"`, `"\ug0e9"`, `"\u0ge9"`, `"\u00eg"`,
		`"\u 0e9"`, `"\u00e "`, `"\u00E9"`, `"\uD83D\uDE02"`, `"\ud83d"`, `"\ude02"`, `"\ud83d\u0041"`,
		`"\ud83d\ude0"`, `"\ud83dx"`, `"x\u07ff\u0800\ud7ff\ue000\uffff\u0080\u007f"`,
		`"\u2028\u2029"`, `"\u0000\u001f\u0020"`, `["\u00e9",` + "\"\xff\"]", `"\u00e9` + "\xc3\"",
		`{"\u00e9":1,"é":2}`, `{"\u00e9":1,"\u00E9":2}`, `{"\ue000":1,"\ud83d\ude02":2}`,
	} {
		sameAsOracle(t, []byte(s))
	}
}

// TestNumbersAgainstOracle: integers and fractions of every length around
// the inline paths' bounds (15 significant digits), with and without a
// sign, a zero integer part, trailing zeros, an exponent, or the end of
// the input right after them, give the same bytes or error as the
// reference implementation.
func TestNumbersAgainstOracle(t *testing.T) {
	digits := "123456789012345678"
	for _, sign := range []string{"", "-"} {
		for n := 0; n <= 17; n++ {
			for f := -1; f <= 17; f++ {
				for _, intPart := range []string{digits[:n], "0" + digits[:n]} {
					lit := sign + intPart
					if f >= 0 {
						lit += "." + digits[:f]
					}
					for _, tail := range []string{"", "0", "00", "e5", "E-2", "e", ".", "x"} {
						num := lit + tail
						sameAsOracle(t, []byte(num))
						sameAsOracle(t, []byte("["+num+"]"))
						sameAsOracle(t, []byte(`{"a":`+num+`,"b":1}`))
					}
				}
			}
		}
	}
}
