package idem_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/url"
	"sort"
	"strings"
	"testing"
)

// A request as the handler sees it: the path parameter, the decoded query
// pairs and the JSON body.
type pairReq struct {
	id    string
	query [][2]string // decoded name, value, in arrival order
	enc   int         // query spelling: 0 QueryEscape ('+'), 1 %20, 2 lower-case hex
	body  map[string]string
	order []string // body member order
}

func (r pairReq) clone() pairReq {
	c := r
	c.query = append([][2]string(nil), r.query...)
	c.body = map[string]string{}
	for k, v := range r.body {
		c.body[k] = v
	}
	c.order = append([]string(nil), r.order...)
	return c
}

func (r pairReq) rawQuery() string {
	var parts []string
	for _, p := range r.query {
		k, v := url.QueryEscape(p[0]), url.QueryEscape(p[1])
		switch r.enc {
		case 1:
			k, v = strings.ReplaceAll(k, "+", "%20"), strings.ReplaceAll(v, "+", "%20")
		case 2:
			k, v = lowerHex(k), lowerHex(v)
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, "&")
}

func lowerHex(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			b.WriteString("%" + strings.ToLower(s[i+1:i+3]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (r pairReq) rawBody() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range r.order {
		if i > 0 {
			b.WriteString(", ")
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.WriteString(r.body[k])
	}
	b.WriteByte('}')
	return b.String()
}

// view is the oracle: two requests are the same request exactly when their
// views are equal (path parameter, query pairs sorted by name with repeated
// names in order, body value with numbers compared as exact rationals and
// strings byte for byte).
func (r pairReq) view() string {
	q := append([][2]string(nil), r.query...)
	sort.SliceStable(q, func(i, j int) bool { return q[i][0] < q[j][0] })
	dec := json.NewDecoder(strings.NewReader(r.rawBody()))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		panic(err)
	}
	var body bytes.Buffer
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&body, "%q=", k)
		switch x := v[k].(type) {
		case json.Number:
			rat, ok := new(big.Rat).SetString(string(x))
			if !ok {
				panic(x)
			}
			body.WriteString("n:" + rat.RatString())
		default:
			fmt.Fprintf(&body, "%T:%q", x, fmt.Sprint(x))
		}
		body.WriteByte(';')
	}
	return fmt.Sprintf("%q|%q|%s", r.id, q, body.String())
}

// inexact reports whether the body holds a number a double cannot hold
// exactly (the guard answers 400 for it).
func (r pairReq) inexact() bool {
	for _, v := range r.body {
		if _, isNum := pairNumbers[v]; isNum && pairNumbers[v] {
			return true
		}
	}
	return false
}

var (
	// Unicode normalisation forms: composed and decomposed spellings.
	pairStrings = []string{"café", "cafe\u0301", "Å", "A\u030a", "x y", "x+y", "1,2", "", "a/b", "ﬁ", "fi"}
	// number literals -> whether a double cannot hold them exactly.
	pairNumbers = map[string]bool{
		"5": false, "5.0": false, "5e0": false, "500": false, "0.1": false, "1e-1": false,
		"12345678901234567890": true, "12345678901234567891": true, "12345678901234567000": false,
		"0.10000000000000000001": true, "9007199254740993": true, "9007199254740992": false,
	}
	pairNames = []string{"a", "b", "amount", "tag"}
)

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

func pairNumber(rng *rand.Rand) string {
	keys := make([]string, 0, len(pairNumbers))
	for k := range pairNumbers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return pick(rng, keys)
}

func randomPairReq(rng *rand.Rand) pairReq {
	r := pairReq{id: pick(rng, pairStrings[:7]) + "1", enc: rng.IntN(3), body: map[string]string{}}
	for n := rng.IntN(4); n > 0; n-- {
		r.query = append(r.query, [2]string{pick(rng, pairNames), pick(rng, pairStrings)})
	}
	r.body["amount"] = pairNumber(rng)
	note, _ := json.Marshal(pick(rng, pairStrings))
	r.body["note"] = string(note)
	r.order = []string{"amount", "note"}
	if rng.IntN(2) == 0 {
		r.order = []string{"note", "amount"}
	}
	return r
}

// mutate changes one aspect of r: some changes make a different request,
// others only respell the same one. The oracle (view) decides which.
func mutate(rng *rand.Rand, r pairReq) (pairReq, string) {
	c := r.clone()
	switch k := rng.IntN(9); k {
	case 0:
		c.id = pick(rng, pairStrings[:7]) + pick(rng, []string{"1", "2"})
		return c, "path parameter"
	case 1:
		if len(c.query) > 0 {
			c.query[rng.IntN(len(c.query))][1] = pick(rng, pairStrings)
		}
		return c, "query value"
	case 2:
		if len(c.query) > 0 {
			c.query = append(c.query, c.query[rng.IntN(len(c.query))])
		} else {
			c.query = [][2]string{{"a", "1"}, {"a", "1"}}
		}
		return c, "duplicate query key"
	case 3:
		rng.Shuffle(len(c.query), func(i, j int) { c.query[i], c.query[j] = c.query[j], c.query[i] })
		return c, "query order"
	case 4:
		c.enc = (c.enc + 1 + rng.IntN(2)) % 3
		return c, "query spelling"
	case 5:
		c.body["amount"] = pairNumber(rng)
		return c, "number (precision, spelling)"
	case 6:
		note, _ := json.Marshal(pick(rng, pairStrings))
		c.body["note"] = string(note)
		return c, "body string (Unicode forms)"
	case 7:
		c.order[0], c.order[1] = c.order[1], c.order[0]
		return c, "body member order"
	default:
		c.query = append(c.query, [2]string{pick(rng, pairNames), pick(rng, pairStrings)})
		return c, "query pair added"
	}
}

// Property: for any two requests under one key, the second is answered
// 409 (or 400 for a number a double cannot hold) unless it is the same
// request, which replays; never a replay of a different request, on every
// adapter.
func TestRequestPairsNeverReplayADifferentRequest(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 60
	}
	for _, a := range refundAdapters {
		t.Run(a.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(9, uint64(len(a.name))))
			for i := range n {
				checkPair(t, a, rng, i)
			}
		})
	}
}

// FuzzRequestPairs explores the same property from fuzzed seeds:
// go test -fuzz FuzzRequestPairs ./idem/
func FuzzRequestPairs(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Fuzz(func(t *testing.T, s1, s2 uint64) {
		rng := rand.New(rand.NewPCG(s1, s2))
		for _, a := range refundAdapters {
			checkPair(t, a, rng, 0)
		}
	})
}

func checkPair(t *testing.T, a refundAdapter, rng *rand.Rand, i int) {
	t.Helper()
	base := randomPairReq(rng)
	other, what := mutate(rng, base)
	e := refundEnv(t, nil)
	send := func(r pairReq) answer {
		return a.send(t, e, refundReq{id: r.id, query: r.rawQuery(), body: r.rawBody()})
	}
	first := send(base)
	second := send(other)
	same := base.view() == other.view()
	replay := second.headers.Get("Openwop-Idempotent-Replay") == "true"
	ctx := fmt.Sprintf("%s #%d %s:\n  first  %s ?%s %s -> %d\n  second %s ?%s %s -> %d %s",
		a.name, i, what, base.id, base.rawQuery(), base.rawBody(), first.status, other.id, other.rawQuery(), other.rawBody(), second.status, second.body)
	switch {
	case base.inexact() != (first.status == 400) || other.inexact() && second.status != 400:
		t.Fatalf("inexact number not refused / exact refused: %s", ctx)
	case other.inexact():
	case first.status == 400:
		if second.status != 201 || replay {
			t.Fatalf("after a refused first request: %s", ctx)
		}
	case replay && !same:
		t.Fatalf("a different request was answered with a replay: %s", ctx)
	case same && !replay:
		t.Fatalf("the same request (respelled) was not replayed: %s", ctx)
	case !same && second.status != 409:
		t.Fatalf("a different request under the same key was not 409: %s", ctx)
	}
}
