package jcs

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// TestRFC8785Reference runs the RFC author's reference test data: every
// input must canonicalise to the exact bytes of output/ and of outhex/.
func TestRFC8785Reference(t *testing.T) {
	dir := shared.Path(t, "rfc8785")
	inputs, err := filepath.Glob(filepath.Join(dir, "input", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) < 6 {
		t.Fatalf("expected the 6 RFC 8785 reference inputs in %s, found %d", dir, len(inputs))
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".json")
		t.Run(name, func(t *testing.T) {
			data := mustRead(t, in)
			want := mustRead(t, filepath.Join(dir, "output", name+".json"))
			wantHex := decodeOutHex(t, mustRead(t, filepath.Join(dir, "outhex", name+".txt")))
			got, err := Canonicalize(data)
			if err != nil {
				t.Fatalf("Canonicalize: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output mismatch\n got: %s\nwant: %s", got, want)
			}
			if !bytes.Equal(got, wantHex) {
				t.Errorf("outhex mismatch\n got: %x\nwant: %x", got, wantHex)
			}
			// The canonical form is a fixed point.
			again, err := Canonicalize(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("not idempotent: %s (%v)", again, err)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodeOutHex(t *testing.T, b []byte) []byte {
	t.Helper()
	out, err := hex.DecodeString(strings.Join(strings.Fields(string(b)), ""))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCanonicalForms(t *testing.T) {
	cases := []struct{ in, want string }{
		// Whitespace and literals.
		{" \t\r\n[ true , false,null ] \n", `[true,false,null]`},
		{`"x"`, `"x"`},
		{`  7  `, `7`},
		{`{}`, `{}`},
		{`[]`, `[]`},
		{`{ }`, `{}`},
		{`[ ]`, `[]`},
		// Escapes: only the mandatory and short ones survive.
		{`"\u0041\/\u00e9"`, `"A/é"`},
		{`"\b\f\n\r\t\"\\"`, `"\b\f\n\r\t\"\\"`},
		{`"\u0008\u000C\u000a\u000D\u0009\u0022\u005C"`, `"\b\f\n\r\t\"\\"`},
		{`"\u0000\u0001\u001f\u007f"`, "\"\\u0000\\u0001\\u001f\x7f\""},
		{`"\u001F"`, `"\u001f"`},
		{`"<>&\u2028\u2029"`, "\"<>&\u2028\u2029\""},
		{"\"<>&\u2028\u2029\"", "\"<>&\u2028\u2029\""},
		{`"\ud83d\ude02"`, `"😂"`},
		{`"\uD83D\uDE02"`, `"😂"`},
		{`"\uFFFF\uFFFD"`, "\"\uffff\ufffd\""},
		{"\"\xef\xbf\xbd\"", "\"\ufffd\""}, // a literal U+FFFD is valid UTF-8
		// No Unicode normalisation.
		{`"A\u030a"`, "\"A\u030a\""},
		{`"\u00c5"`, "\"\u00c5\""},
		// Member order: UTF-16 code units, after unescaping.
		{`{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{`{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{`{"aa":1,"a":2,"":3}`, `{"":3,"a":2,"aa":1}`},
		{`{"\ufb33":1,"\ud83d\ude02":2}`, "{\"\U0001f602\":2,\"\ufb33\":1}"}, // surrogate pair (D83D) < FB33
		{`{"\ue000":1,"\ud800\udc00":2}`, "{\"\U00010000\":2,\"\ue000\":1}"},
		{`{"\u00e9":1,"e":2,"z":3}`, "{\"e\":2,\"z\":3,\"\u00e9\":1}"},
		{`{"getWeather":1,"get_weather":2}`, `{"getWeather":1,"get_weather":2}`},
		{`{"get_weather":1,"getWeather":2}`, `{"getWeather":2,"get_weather":1}`},
		{`{"B":1,"a":2,"A":3}`, `{"A":3,"B":1,"a":2}`},
		{`{"\n":1,"\r":2,"\u0000":3}`, `{"\u0000":3,"\n":1,"\r":2}`},
		// Nested objects sorted independently; arrays keep their order.
		{`{"z":{"y":1,"x":[3,2,{"b":0,"a":0}]},"a":[{"d":1,"c":2}]}`, `{"a":[{"c":2,"d":1}],"z":{"x":[3,2,{"a":0,"b":0}],"y":1}}`},
		{`[{"b":{"d":1,"c":2},"a":3},{"f":1,"e":2}]`, `[{"a":3,"b":{"c":2,"d":1}},{"e":2,"f":1}]`},
	}
	for _, c := range cases {
		got, err := Canonicalize([]byte(c.in))
		if err != nil {
			t.Errorf("Canonicalize(%q): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("Canonicalize(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestNumberEdgeCases(t *testing.T) {
	cases := []struct{ in, want string }{
		{"0", "0"},
		{"-0", "0"},
		{"-0.0", "0"},
		{"0e10", "0"},
		{"-0e-10", "0"},
		{"1", "1"},
		{"-1", "-1"},
		{"1.0", "1"},
		{"4.50", "4.5"},
		{"2e-3", "0.002"},
		{"1E30", "1e+30"},
		{"1e21", "1e+21"},
		{"1e+21", "1e+21"},
		{"999999999999999999999", "1e+21"},
		{"1e20", "100000000000000000000"},
		{"123456789012345678901", "123456789012345680000"},
		{"1e-6", "0.000001"},
		{"1e-7", "1e-7"},
		{"1.5e-7", "1.5e-7"},
		{"0.0000001", "1e-7"},
		{"0.000001", "0.000001"},
		{"0.000000000000000000000000001", "1e-27"},
		{"5e-324", "5e-324"},
		{"4.9e-324", "5e-324"},
		{"2e-324", "0"},
		{"1e-400", "0"},
		{"-1e-400", "0"},
		{"1.7976931348623157e308", "1.7976931348623157e+308"},
		{"-1.7976931348623157e308", "-1.7976931348623157e+308"},
		{"2.2250738585072014e-308", "2.2250738585072014e-308"},
		{"333333333.33333329", "333333333.3333333"},
		{"333333333.3333332", "333333333.3333332"},
		{"0.1", "0.1"},
		{"0.30000000000000004", "0.30000000000000004"},
		{"9007199254740991", "9007199254740991"},
		{"9007199254740992", "9007199254740992"},
		{"9007199254740993", "9007199254740992"},
		{"123456789012345", "123456789012345"},
		{"1234567890123456", "1234567890123456"},
		{"12345678901234567", "12345678901234568"},
		{"100000000000000000000000", "1e+23"},
		{"295147905179352830000", "295147905179352830000"},
		{"1e23", "1e+23"},
		{"1.2e-5", "0.000012"},
		{"-1.2e-5", "-0.000012"},
		{"1e308", "1e+308"},
		{"1e-100", "1e-100"},
		{"1E-7", "1e-7"},
		{"10E+1", "100"},
		{"5e-7", "5e-7"},
		{"0.00001", "0.00001"},
		{"-5.5e+22", "-5.5e+22"},
		{"1.0000000000000002", "1.0000000000000002"},
		{"1.00000000000000001", "1"},
	}
	for _, c := range cases {
		got, err := Canonicalize([]byte(c.in))
		if err != nil {
			t.Errorf("Canonicalize(%s): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("Canonicalize(%s) = %s, want %s", c.in, got, c.want)
		}
		// Inside a container too (the fast integer path ends at a delimiter).
		got, err = Canonicalize([]byte("[" + c.in + "," + c.in + "]"))
		if err != nil || string(got) != "["+c.want+","+c.want+"]" {
			t.Errorf("in array: %s: got %s (%v)", c.in, got, err)
		}
	}
}

// TestNumbersAgainstECMAScript checks AppendNumber against
// Number.prototype.toString as computed by node (testdata/es6numbers.txt,
// see testdata/gen_es6numbers.js): random bit patterns over the whole
// exponent range plus values around the notation switches.
func TestNumbersAgainstECMAScript(t *testing.T) {
	n := 0
	forLines(t, "testdata/es6numbers.txt", func(fields []string) {
		bits, err := strconv.ParseUint(fields[0], 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		f := math.Float64frombits(bits)
		got, err := AppendNumber(nil, f)
		if err != nil || string(got) != fields[1] {
			t.Errorf("AppendNumber(%016x = %v) = %s (%v), ECMAScript %s", bits, f, got, err, fields[1])
		}
		// The ECMAScript string is itself canonical.
		if c, err := Canonicalize([]byte(fields[1])); err != nil || string(c) != fields[1] {
			t.Errorf("Canonicalize(%s) = %s (%v)", fields[1], c, err)
		}
		n++
	})
	if n < 3000 {
		t.Fatalf("only %d vectors read", n)
	}
}

// TestLiteralsAgainstECMAScript checks parse-then-format of number literals
// against JSON.stringify(JSON.parse(literal)) as computed by node
// (testdata/es6literals.txt, see testdata/gen_es6literals.js).
func TestLiteralsAgainstECMAScript(t *testing.T) {
	n := 0
	forLines(t, "testdata/es6literals.txt", func(fields []string) {
		got, err := Canonicalize([]byte(fields[0]))
		if fields[1] == "REJECT" {
			if !errors.Is(err, ErrNumber) {
				t.Errorf("Canonicalize(%s) = %s, %v; want ErrNumber", fields[0], got, err)
			}
		} else if err != nil || string(got) != fields[1] {
			t.Errorf("Canonicalize(%s) = %s (%v), ECMAScript %s", fields[0], got, err, fields[1])
		}
		n++
	})
	if n < 1000 {
		t.Fatalf("only %d vectors read", n)
	}
}

func forLines(t *testing.T, path string, fn func([]string)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			t.Fatalf("bad line %q", line)
		}
		fn(fields)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestAppendNumberRejectsNonFinite(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		dst := []byte("x")
		got, err := AppendNumber(dst, f)
		if !errors.Is(err, ErrNumber) || string(got) != "x" {
			t.Errorf("AppendNumber(%v) = %q, %v", f, got, err)
		}
	}
}

func TestRejections(t *testing.T) {
	cases := []struct {
		in     string
		err    error // sentinel, or nil for *SyntaxError
		offset int64
	}{
		// Duplicate names, compared after unescaping.
		{`{"a":1,"a":2}`, ErrDuplicateKey, 7},
		{`{"a":1,"\u0061":2}`, ErrDuplicateKey, 7},
		{`{"b":1,"a":2,"b":3}`, ErrDuplicateKey, 13},
		{`{"x":{"a":1,"b":2,"a":3}}`, ErrDuplicateKey, 18},
		{`[{"a":1},{"a":1,"a":1}]`, ErrDuplicateKey, 16},
		{`{"\ud83d\ude02":1,"😂":2}`, ErrDuplicateKey, 18},
		{`{"\n":1,"\u000a":2}`, ErrDuplicateKey, 8},
		// Lone surrogates, escaped.
		{`"\ud800"`, ErrLoneSurrogate, 1},
		{`"\uD800"`, ErrLoneSurrogate, 1},
		{`"\udc00"`, ErrLoneSurrogate, 1},
		{`"a\udfff"`, ErrLoneSurrogate, 2},
		{`"\ud800\u0041"`, ErrLoneSurrogate, 1},
		{`"\ud800\ud800"`, ErrLoneSurrogate, 1},
		{`"\ud800x"`, ErrLoneSurrogate, 1},
		{`"\ud83d\\ude02"`, ErrLoneSurrogate, 1},
		{`"\ude02\ud83d"`, ErrLoneSurrogate, 1},
		{`{"\ud800":1}`, ErrLoneSurrogate, 2},
		// Invalid UTF-8, raw.
		{"\"\xff\"", ErrInvalidUTF8, 1},
		{"\"ab\xc3\"", ErrInvalidUTF8, 3},
		{"\"\xc3\x28\"", ErrInvalidUTF8, 1},
		{"\"\xed\xa0\x80\"", ErrInvalidUTF8, 1}, // UTF-8-encoded surrogate
		{"\"\xc0\xaf\"", ErrInvalidUTF8, 1},     // overlong
		{"\"\xf4\x90\x80\x80\"", ErrInvalidUTF8, 1},
		{"\"\\n\xff\"", ErrInvalidUTF8, 3}, // on the slow path
		{"{\"\xff\":1}", ErrInvalidUTF8, 2},
		// Numbers that are not finite doubles.
		{`1e400`, ErrNumber, 0},
		{`[-1e309]`, ErrNumber, 1},
		{`1.8e308`, ErrNumber, 0},
		{`{"a":123456789e301}`, ErrNumber, 5},
		// Syntax.
		{``, nil, 0},
		{`   `, nil, 3},
		{`01`, nil, 1},
		{`-01`, nil, 2},
		{`1.`, nil, 2},
		{`.5`, nil, 0},
		{`+1`, nil, 0},
		{`-`, nil, 1},
		{`1e`, nil, 2},
		{`1e+`, nil, 3},
		{`0x10`, nil, 1},
		{`NaN`, nil, 0},
		{`Infinity`, nil, 0},
		{`[1,]`, nil, 3},
		{`{"a":1,}`, nil, 7},
		{`{"a" 1}`, nil, 5},
		{`{a:1}`, nil, 1},
		{`{'a':1}`, nil, 1},
		{`[1 2]`, nil, 3},
		{`[1] x`, nil, 4},
		{`[1][2]`, nil, 3},
		{`[`, nil, 1},
		{`{`, nil, 1},
		{`{"a":1`, nil, 6},
		{`"abc`, nil, 4},
		{"\"a\nb\"", nil, 2},
		{"\"a\x00b\"", nil, 2},
		{`"\x"`, nil, 1},
		{`"\u12"`, nil, 1},
		{`"\u12g4"`, nil, 1},
		{`"\`, nil, 2},
		{`tru`, nil, 0},
		{`nul`, nil, 0},
		{`falsey`, nil, 5},
		{"\xef\xbb\xbf{}", nil, 0}, // BOM
		{"[\v1]", nil, 1},
		{"[1]\x00", nil, 3},
	}
	for _, c := range cases {
		out, err := Canonicalize([]byte(c.in))
		if err == nil {
			t.Errorf("Canonicalize(%q) = %q, want error", c.in, out)
			continue
		}
		if out != nil {
			t.Errorf("Canonicalize(%q) returned output %q with error", c.in, out)
		}
		if c.err != nil {
			var e *Error
			if !errors.Is(err, c.err) || !errors.As(err, &e) {
				t.Errorf("Canonicalize(%q) = %v, want %v", c.in, err, c.err)
				continue
			}
			if e.Offset != c.offset {
				t.Errorf("Canonicalize(%q) offset %d, want %d (%v)", c.in, e.Offset, c.offset, err)
			}
			continue
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Canonicalize(%q) = %v (%T), want *SyntaxError", c.in, err, err)
			continue
		}
		if se.Offset != c.offset {
			t.Errorf("Canonicalize(%q) offset %d, want %d (%v)", c.in, se.Offset, c.offset, err)
		}
		for _, s := range []error{ErrDuplicateKey, ErrLoneSurrogate, ErrInvalidUTF8, ErrNumber, ErrTooDeep} {
			if errors.Is(err, s) {
				t.Errorf("Canonicalize(%q): syntax error also matches %v", c.in, s)
			}
		}
	}
}

func TestDepth(t *testing.T) {
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	got, err := Canonicalize([]byte(ok))
	if err != nil || string(got) != ok {
		t.Fatalf("depth %d: %v", MaxDepth, err)
	}
	deep := strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1)
	if _, err := Canonicalize([]byte(deep)); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("depth %d: got %v, want ErrTooDeep", MaxDepth+1, err)
	}
	// A million open brackets must fail quickly and without exhausting the stack.
	if _, err := Canonicalize(bytes.Repeat([]byte("["), 1<<20)); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("1M brackets: got %v", err)
	}
}

func TestAppend(t *testing.T) {
	dst := []byte("prefix:")
	out, err := Append(dst, []byte(`{"b":[1, 2],"a":"x"}`))
	if err != nil || string(out) != `prefix:{"a":"x","b":[1,2]}` {
		t.Fatalf("Append = %q, %v", out, err)
	}
	// On error the prefix is returned intact (length and content).
	out, err = Append(out[:7], []byte(`{"b":[1, 2],"b":"x"}`))
	if !errors.Is(err, ErrDuplicateKey) || string(out) != "prefix:" {
		t.Fatalf("Append on error = %q, %v", out, err)
	}
	// Reusing one buffer does not allocate.
	buf := make([]byte, 0, 1024)
	in := []byte(`{"z":1,"y":[true,null,"s\n"],"x":{"b":1.5,"a":-0}}`)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		buf, err = Append(buf[:0], in)
		if err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 && !raceEnabled {
		t.Errorf("Append with a reused buffer: %v allocs/op, want 0", allocs)
	}
	if string(buf) != `{"x":{"a":0,"b":1.5},"y":[true,null,"s\n"],"z":1}` {
		t.Errorf("got %s", buf)
	}
}

func TestSum256(t *testing.T) {
	in := []byte(`{"b":2, "a":1}`)
	sum, err := Sum256(in)
	if err != nil {
		t.Fatal(err)
	}
	want := "43258cff783fe7036d8a43033f830adfc60ec037382473548ac742b888292777" // sha256 of {"a":1,"b":2}
	if hex.EncodeToString(sum[:]) != want {
		t.Errorf("Sum256 = %x, want %s", sum, want)
	}
	if _, err := Sum256([]byte(`{"a":1,"a":1}`)); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("Sum256 dup: %v", err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = Sum256(in) }); allocs != 0 && !raceEnabled {
		t.Errorf("Sum256: %v allocs/op, want 0", allocs)
	}
}

func TestMarshal(t *testing.T) {
	type inner struct {
		Z string  `json:"z"`
		A float64 `json:"a"`
	}
	v := map[string]any{
		"html":   "<a href=\"x\">&</a>\u2028",
		"num":    []any{1e21, 1e-7, 0.1, math.Copysign(0, -1), 333333333.33333329, int64(1) << 60},
		"inner":  inner{Z: "z", A: 4.5},
		"\u00e9": true,
		"e":      nil,
		"raw":    json.RawMessage(`{"y":1, "x":2}`),
		"bytes":  []byte("hi"),
	}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"bytes":"aGk=","e":null,"html":"<a href=\"x\">&</a>` + "\u2028" + `","inner":{"a":4.5,"z":"z"},"num":[1e+21,1e-7,0.1,0,333333333.3333333,1152921504606847000],"raw":{"x":2,"y":1},"` + "\u00e9" + `":true}`
	if string(got) != want {
		t.Errorf("Marshal\n got %s\nwant %s", got, want)
	}
	for _, bad := range []any{math.NaN(), []float64{math.Inf(1)}, float32(math.Inf(-1))} {
		if _, err := Marshal(bad); !errors.Is(err, ErrNumber) {
			t.Errorf("Marshal(%v) = %v, want ErrNumber", bad, err)
		}
	}
	if _, err := Marshal(json.RawMessage(`{"a":1,"a":2}`)); !errors.Is(err, ErrDuplicateKey) {
		t.Errorf("Marshal(dup raw) = %v", err)
	}
	if _, err := Marshal(make(chan int)); err == nil {
		t.Error("Marshal(chan) succeeded")
	}
}

func TestCompareUTF16(t *testing.T) {
	// Sorted in UTF-16 code-unit order (what JavaScript's sort() gives).
	sorted := []string{"", "\x00", "A", "B", "Z", "_", "a", "aa", "ab", "b", "\u007f", "\u0080", "\u00e9", "\u0800", "\ud7ff", "\U00010000", "\U0001f602", "\U0010ffff", "\ue000", "\ufb33", "\uffff"}
	for i := range sorted {
		for j := range sorted {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := CompareUTF16(sorted[i], sorted[j]); got != want {
				t.Errorf("CompareUTF16(%q, %q) = %d, want %d", sorted[i], sorted[j], got, want)
			}
			if got := CompareUTF16([]byte(sorted[i]), []byte(sorted[j])); got != want {
				t.Errorf("CompareUTF16([]byte) (%q, %q) = %d, want %d", sorted[i], sorted[j], got, want)
			}
		}
	}
	// Common prefixes that end inside a multi-byte character.
	if CompareUTF16("x\U0001f602", "x\U0001f603") != -1 || CompareUTF16("x\ufb33", "x\U0001f602") != 1 {
		t.Error("multi-byte difference after shared lead bytes")
	}
	// Invalid UTF-8 must not panic.
	_ = CompareUTF16("\xf0", "\xf0\x9f")
	_ = CompareUTF16("\x80\x80\x80\x80a", "\x80\x80\x80\x80b")
}

func TestAppendString(t *testing.T) {
	got, err := AppendString(nil, "a\"\\\n\x01<\u2028A\u030a")
	if err != nil || string(got) != "\"a\\\"\\\\\\n\\u0001<\u2028A\u030a\"" {
		t.Errorf("AppendString = %q, %v", got, err)
	}
	if _, err := AppendString(nil, "\xff"); !errors.Is(err, ErrInvalidUTF8) {
		t.Errorf("AppendString invalid: %v", err)
	}
}

// TestAgreesWithEncodingJSON: for a varied corpus, the canonical output is
// valid JSON that encoding/json decodes to the same value as the input, and
// a fixed point of Canonicalize.
func TestAgreesWithEncodingJSON(t *testing.T) {
	corpus := []string{
		`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
		string(testBody(64 << 10)),
		`[{"\u00e9":{"\ud83d\ude02":[1,2,{"z":"\u0000","y":-0.0}]}}]`,
	}
	for _, in := range corpus {
		checkAgainstEncodingJSON(t, []byte(in))
	}
}

func checkAgainstEncodingJSON(t *testing.T, in []byte) {
	t.Helper()
	out, err := Canonicalize(in)
	if err != nil {
		t.Fatalf("Canonicalize: %v", err)
	}
	if !json.Valid(out) {
		t.Fatalf("output is not valid JSON: %q", out)
	}
	var a, b any
	if err := json.Unmarshal(in, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("value changed:\n in %.200s\nout %.200s", in, out)
	}
	again, err := Canonicalize(out)
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("not a fixed point: %v", err)
	}
}

// TestConcurrent exercises the pooled state from many goroutines (run with
// -race): every result must match the single-threaded one.
func TestConcurrent(t *testing.T) {
	inputs := [][]byte{
		testBody(8 << 10),
		[]byte(`{"b":{"d":1,"c":[{"f":1,"e":2}]},"a":"\u00e9\n"}`),
		[]byte(`{"a":1,"a":2}`),
		[]byte(`[1e400]`),
	}
	want := make([][]byte, len(inputs))
	wantErr := make([]error, len(inputs))
	for i, in := range inputs {
		want[i], wantErr[i] = Canonicalize(in)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 64)
			for n := 0; n < 50; n++ {
				i := (g + n) % len(inputs)
				var err error
				buf, err = Append(buf[:0], inputs[i])
				if (err == nil) != (wantErr[i] == nil) || (err == nil && !bytes.Equal(buf, want[i])) {
					t.Errorf("goroutine %d input %d: got %.60q %v", g, i, buf, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// testBody returns a realistic API request body of about size bytes:
// indented, unsorted keys, mixed strings (some escaped, some non-ASCII),
// integers and fractions.
func testBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString("{\n  \"request_id\": \"req-1\",\n  \"items\": [\n")
	for i := 0; b.Len() < size-200; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		b.WriteString(`    {"sku": "SKU-` + strconv.Itoa(100000+i) + `", "quantity": ` + strconv.Itoa(i%17+1) +
			`, "unit_price": ` + strconv.FormatFloat(float64(i)*1.25+0.99, 'f', -1, 64) +
			`, "name": "Widget n\u00ba ` + strconv.Itoa(i) + ` \"deluxe\"", "description": "Lorem ipsum dolor sit amet, consectetur adipiscing elit – café",` +
			` "active": ` + strconv.FormatBool(i%2 == 0) + `, "tags": ["a", "b", null], "dims": {"w": 10, "h": 2.5, "d": 1e-3}}`)
	}
	b.WriteString("\n  ],\n  \"currency\": \"EUR\",\n  \"customer\": {\"name\": \"Zoë\", \"email\": \"z@example.com\"}\n}\n")
	return b.Bytes()
}
