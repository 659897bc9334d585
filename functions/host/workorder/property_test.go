package workorder_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemkit/idemkit/functions/host/workorder"
)

// The property tests draw work orders from hand-written generators with
// fixed seeds (reproducible; the failing seed is printed). Values mix ASCII,
// characters a lenient reader confuses (dotless i, long s, Kelvin sign,
// NBSP, U+3000, U+FFFD, astral characters) and characters each format must
// escape.

// runes is the alphabet of generated strings.
var runes = []rune("abcxyzABCXYZ019-_.:/ &<>\"'\\\t\n\rıİſKßéÉ\u00a0\u3000\u2028\ufffd😀中")

// genString is a random string of 1..12 runes from the alphabet, already
// normal: no surrounding ASCII white space.
func genString(r *rand.Rand) string {
	for {
		var b strings.Builder
		for range 1 + r.IntN(12) {
			b.WriteRune(runes[r.IntN(len(runes))])
		}
		if s := strings.Trim(b.String(), " \t\r\n"); s != "" {
			return s
		}
	}
}

// genCode is a normal project code: a string with no ASCII lower-case letter.
func genCode(r *rand.Rand) string {
	return upper(genString(r))
}

func upper(s string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' {
			return c - 32
		}
		return c
	}, s)
}

// genWorkOrder is a random valid work order in its normal form.
func genWorkOrder(r *rand.Rand) workorder.WorkOrder {
	w := workorder.WorkOrder{Number: genString(r)}
	for range 1 + r.IntN(3) {
		p := workorder.Project{Code: genCode(r), Quantity: 1 + r.IntN(20000)}
		if r.IntN(3) > 0 {
			p.Name = genString(r)
		}
		w.Projects = append(w.Projects, p)
	}
	return w
}

// pad surrounds s with random ASCII white space (trimmed by the contract).
func pad(r *rand.Rand, s string) string {
	ws := []string{"", " ", "\t", "\n", "  ", "\r\n"}
	return ws[r.IntN(len(ws))] + s + ws[r.IntN(len(ws))]
}

// lowerSome lower-cases some ASCII letters of a code (the contract
// upper-cases them again).
func lowerSome(r *rand.Rand, s string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'A' && c <= 'Z' && r.IntN(2) == 0 {
			return c + 32
		}
		return c
	}, s)
}

// jsonString writes s as a JSON string, escaping characters at random
// (\uXXXX, surrogate pairs for astral characters, short escapes).
func jsonString(r *rand.Rand, s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		case r.IntN(4) == 0 && c > 0xFFFF:
			c -= 0x10000
			fmt.Fprintf(&b, `\u%04X\u%04x`, 0xD800+(c>>10), 0xDC00+(c&0x3FF))
		case r.IntN(4) == 0 && c <= 0xFFFF:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// toJSON writes w as JSON: members shuffled, values padded, codes in mixed
// case, an empty name sometimes absent.
func toJSON(r *rand.Rand, w workorder.WorkOrder) string {
	var projects []string
	for _, p := range w.Projects {
		m := []string{
			`"code":` + jsonString(r, pad(r, lowerSome(r, p.Code))),
			fmt.Sprintf(`"quantity":%d`, p.Quantity),
		}
		if p.Name != "" || r.IntN(2) == 0 {
			m = append(m, `"name":`+jsonString(r, pad(r, p.Name)))
		}
		r.Shuffle(len(m), func(i, j int) { m[i], m[j] = m[j], m[i] })
		projects = append(projects, "{"+strings.Join(m, ", ")+"}")
	}
	top := []string{`"work_order_number":` + jsonString(r, pad(r, w.Number)), `"projects":[` + strings.Join(projects, ",\n") + "]"}
	r.Shuffle(len(top), func(i, j int) { top[i], top[j] = top[j], top[i] })
	return "{" + strings.Join(top, ", ") + "}"
}

// xmlText writes s as XML text: escaped, with random numeric character
// references, or as a CDATA section where it can be one.
func xmlText(r *rand.Rand, s string) string {
	if r.IntN(4) == 0 && !strings.Contains(s, "]]>") && !strings.Contains(s, "\r") {
		return "<![CDATA[" + s + "]]>"
	}
	var b bytes.Buffer
	for _, c := range s {
		if r.IntN(5) == 0 {
			fmt.Fprintf(&b, "&#x%X;", c)
			continue
		}
		_ = xml.EscapeText(&b, []byte(string(c)))
	}
	return b.String()
}

// toXML writes w as XML: elements shuffled, indentation, values padded,
// codes in mixed case, an empty name sometimes absent, sometimes an XML
// declaration.
func toXML(r *rand.Rand, w workorder.WorkOrder) string {
	el := func(name, text string) string { return "<" + name + ">" + text + "</" + name + ">" }
	var projects []string
	for _, p := range w.Projects {
		m := []string{
			el("code", xmlText(r, lowerSome(r, p.Code))),
			el("quantity", pad(r, fmt.Sprint(p.Quantity))),
		}
		if p.Name != "" || r.IntN(2) == 0 {
			m = append(m, el("name", xmlText(r, p.Name)))
		}
		r.Shuffle(len(m), func(i, j int) { m[i], m[j] = m[j], m[i] })
		projects = append(projects, "<project>"+strings.Join(m, pad(r, ""))+"</project>")
	}
	top := []string{el("work_order_number", pad(r, xmlText(r, w.Number))), el("projects", "\n  "+strings.Join(projects, "\n  ")+"\n")}
	r.Shuffle(len(top), func(i, j int) { top[i], top[j] = top[j], top[i] })
	doc := "<work_order>\n " + strings.Join(top, "\n ") + "\n</work_order>\n"
	if r.IntN(2) == 0 {
		doc = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + doc
	}
	return doc
}

// encode writes w in a random format.
func encode(r *rand.Rand, w workorder.WorkOrder) (mediaType, body string) {
	if r.IntN(2) == 0 {
		return "application/json", toJSON(r, w)
	}
	return "application/xml", toXML(r, w)
}

// mutate changes one thing of w that no stated rule makes equal: one
// character of one string replaced by a character a lenient reader
// confuses with it, or a quantity, or a project dropped or added.
func mutate(r *rand.Rand, w workorder.WorkOrder) workorder.WorkOrder {
	m := workorder.WorkOrder{Number: w.Number, Projects: append([]workorder.Project(nil), w.Projects...)}
	confuse := func(s string) string {
		rs := []rune(s)
		i := r.IntN(len(rs))
		swaps := map[rune][]rune{'i': {'ı', 'İ'}, 'I': {'ı', 'İ'}, 's': {'ſ'}, 'S': {'ſ'}, 'k': {'K'}, 'K': {'K'}, ' ': {'\u00a0', '\u3000'}, 'ß': {'s'}}
		if alts, ok := swaps[rs[i]]; ok {
			rs[i] = alts[r.IntN(len(alts))]
		} else {
			rs[i] = runes[r.IntN(len(runes))]
		}
		if string(rs) == s || strings.Trim(string(rs), " \t\r\n") != string(rs) {
			return s + "ı"
		}
		return string(rs)
	}
	p := &m.Projects[r.IntN(len(m.Projects))]
	switch r.IntN(6) {
	case 0:
		m.Number = confuse(m.Number)
	case 1:
		if c := upper(confuse(p.Code)); c != p.Code {
			p.Code = c
		} else {
			p.Code += "ſ"
		}
	case 2:
		if p.Name == "" {
			p.Name = "\u00a0"
		} else {
			p.Name = confuse(p.Name)
		}
	case 3:
		p.Quantity++
	case 4:
		m.Number += "\u3000x"
	default:
		m.Projects = append(m.Projects, workorder.Project{Code: "ID", Quantity: 1})
	}
	return m
}

const propertyRounds = 3000

// TestPropertyEqualWorkOrdersShareAHashInBothFormats: a random work order,
// written at random in JSON and in XML with every variation the stated
// rules make equal (member and element order, white space, escapes,
// character references, CDATA, code letter case, an empty name absent),
// decodes to itself and so shares one canonical hash.
func TestPropertyEqualWorkOrdersShareAHashInBothFormats(t *testing.T) {
	for seed := range uint64(propertyRounds) {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		w := genWorkOrder(r)
		want := hash(t, w)
		for _, mt := range []string{"application/json", "application/xml"} {
			var body string
			if mt == "application/json" {
				body = toJSON(r, w)
			} else {
				body = toXML(r, w)
			}
			v, err := workorder.Decode(mt, []byte(body))
			if err != nil {
				t.Fatalf("seed %d: %s %q: %v", seed, mt, body, err)
			}
			if got := v.(workorder.WorkOrder); !reflect.DeepEqual(got, w) || hash(t, got) != want {
				t.Fatalf("seed %d: %s %q decodes to %+v, want %+v", seed, mt, body, got, w)
			}
		}
	}
}

// TestPropertyDistinctWorkOrdersNeverShareAHash: random pairs of distinct
// valid work orders — independent ones and near ones (one character
// swapped for one a lenient reader confuses with it, a quantity, a
// project), each written in a random format — never share a canonical
// hash.
func TestPropertyDistinctWorkOrdersNeverShareAHash(t *testing.T) {
	for seed := range uint64(propertyRounds) {
		r := rand.New(rand.NewPCG(seed, 0xd1ff))
		a := genWorkOrder(r)
		b := genWorkOrder(r)
		if seed%2 == 0 {
			b = mutate(r, a)
		}
		if reflect.DeepEqual(a, b) {
			continue
		}
		mtA, bodyA := encode(r, a)
		mtB, bodyB := encode(r, b)
		va, errA := workorder.Decode(mtA, []byte(bodyA))
		vb, errB := workorder.Decode(mtB, []byte(bodyB))
		if errA != nil || errB != nil {
			t.Fatalf("seed %d: valid work orders refused: %v %v (%q, %q)", seed, errA, errB, bodyA, bodyB)
		}
		if hash(t, va.(workorder.WorkOrder)) == hash(t, vb.(workorder.WorkOrder)) {
			t.Fatalf("seed %d: distinct work orders share a hash:\n%s %q\n%s %q", seed, mtA, bodyA, mtB, bodyB)
		}
	}
}

// TestPropertyCorruptedBodiesAreRefusedNotConfused: a valid body with one
// byte replaced by a byte that makes it invalid UTF-8 is refused in both
// formats, never decoded to some work order.
func TestPropertyCorruptedBodiesAreRefusedNotConfused(t *testing.T) {
	for seed := range uint64(propertyRounds) {
		r := rand.New(rand.NewPCG(seed, 0xbad))
		mt, body := encode(r, genWorkOrder(r))
		b := []byte(body)
		b[r.IntN(len(b))] = byte(0x80 + r.IntN(0x80))
		if utf8.Valid(b) {
			continue
		}
		if v, err := workorder.Decode(mt, b); err == nil {
			t.Fatalf("seed %d: %s %q (invalid UTF-8) decoded to %+v", seed, mt, b, v)
		}
	}
}

// The generators write what the decoder reads: a check on the helpers.
func TestPropertyGeneratorsWriteValidDocuments(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	w := genWorkOrder(r)
	if !json.Valid([]byte(toJSON(r, w))) {
		t.Fatal("toJSON wrote invalid JSON")
	}
	if err := xml.Unmarshal([]byte(toXML(r, w)), new(struct{})); err != nil {
		t.Fatalf("toXML wrote invalid XML: %v", err)
	}
}
