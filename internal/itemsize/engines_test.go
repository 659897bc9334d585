package itemsize_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/itemsize"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// numberSizes are number attribute values and the bytes DynamoDB Local
// (AWS's own engine, the reference for DynamoDB) bills for them, read off
// its consumed capacity at the 1 KB mark (TestNumberSizesAreTheEngines
// checks every row there and on dynalite): one byte, plus one per pair of
// digits when the significant digits are cut into pairs aligned on the
// decimal point, plus one for a negative number whose pairs are fewer
// than 20. Rows cover positive, negative and fractional numbers, even
// and odd digit counts starting on even and odd powers of ten, exponent
// notation, 38 significant digits, and times in seconds and milliseconds.
var numberSizes = []struct {
	n    string
	want int
}{
	{"0", 1}, {"-0", 1}, {"0.0", 1}, {"-0.000", 1},
	{"1", 2}, {"10", 2}, {"100", 2}, {"12", 2}, {"00012", 2}, {"1200", 2},
	{"120", 3}, {"123", 3}, {"1234", 3}, {"12345", 4},
	{"-1", 3}, {"-10", 3}, {"-100", 3}, {"-12", 3}, {"-120", 4}, {"-123", 4},
	{"0.1", 2}, {"0.12", 2}, {"0.012", 3}, {"1.5", 3}, {"-1.5", 4}, {"1.20", 3},
	{"12.34", 3}, {"-12.34", 4}, {"123.4", 4}, {"-123.4", 5},
	{"5E3", 2}, {"5e-3", 2}, {"-5E-3", 3}, {"1.5E+1", 2},
	{"1E-130", 2}, {"-1E-130", 3}, {"1E+125", 2},
	// times: seconds (ten digits, the first on 10^9) and milliseconds
	// (thirteen, the first on 10^12: one byte more when the significant
	// digits are even in count, an odd number of trailing zeros).
	{"1764720000", 4}, {"1764806401", 6}, {"1764720000123", 8}, {"1764720000120", 8},
	{"1764720000100", 7}, {"1764720000000", 5}, {"1764806400010", 8}, {"17647200001", 7},
	// 38 significant digits, the most DynamoDB keeps; 20 pairs when they
	// start on an even power of ten.
	{"12345678901234567890123456789012345678", 20},
	{"-12345678901234567890123456789012345678", 21},
	{"1234567890123456789012345678901234567", 20},
	{"-1234567890123456789012345678901234567", 21},
	{"1234567890123456789012345678901234567800", 20},
	{"-1234567890123456789012345678901234567800", 21},
	{"123456789012345678901234567890123456780", 21},
	{"-123456789012345678901234567890123456780", 21},
	{"-1234567890123456789012345678901234567.8", 21},
	{"-12345678901234567890123456789012345678E-40", 21},
	{"-12345678901234567890123456789012345678E-41", 21},
	{"-12345678901234567890123456789012345600", 20},
	{"9.9999999999999999999999999999999999999E+125", 20},
	{"-1234567890123456789", 12}, {"-12345678901234567890", 12}, {"-123456789012345678901", 13},
}

// TestNumberSizes pins itemsize.Number to the sizes DynamoDB Local bills
// (numberSizes).
func TestNumberSizes(t *testing.T) {
	for _, c := range numberSizes {
		if got := itemsize.Number(c.n); got != c.want {
			t.Errorf("Number(%s) = %d, want %d", c.n, got, c.want)
		}
	}
}

// dynaliteMore is how many bytes more dynalite counts n than DynamoDB
// Local: one for a negative number of 20 digit pairs (38 significant
// digits starting on an even power of ten), which DynamoDB Local stores
// without the byte that ends a shorter negative number; none otherwise.
func dynaliteMore(n string) int {
	if abs, neg := strings.CutPrefix(n, "-"); neg && itemsize.Number(abs) == 21 {
		return 1
	}
	return 0
}

// randomNumbers are n numbers of 1 to 38 significant digits, with up to
// five trailing zeros, either sign, the decimal point anywhere or in
// exponent notation, from a fixed seed.
func randomNumbers(n int) []string {
	r := rand.New(rand.NewPCG(30, 578))
	out := make([]string, 0, n)
	for len(out) < n {
		d := 1 + r.IntN(38)
		var b strings.Builder
		if r.IntN(2) == 0 {
			b.WriteByte('-')
		}
		digits := make([]byte, d)
		for i := range digits {
			digits[i] = byte('0' + r.IntN(10))
		}
		digits[0] = byte('1' + r.IntN(9))
		digits[d-1] = byte('1' + r.IntN(9))
		s := string(digits) + strings.Repeat("0", r.IntN(6))
		switch r.IntN(3) {
		case 0:
			b.WriteString(s)
		case 1:
			p := 1 + r.IntN(len(s))
			b.WriteString(s[:p])
			if p < len(s) {
				b.WriteString("." + s[p:])
			}
		default:
			fmt.Fprintf(&b, "%s.%sE%d", s[:1], s[1:], r.IntN(200)-100)
		}
		out = append(out, b.String())
	}
	return out
}

// times are the retention and lease times a record item holds, in
// milliseconds and in seconds, over a day from an instant ending in 10 ms.
func times() []string {
	start := time.Date(2026, 12, 8, 0, 0, 0, 10e6, time.UTC)
	var out []string
	for i := range 40 {
		at := start.Add(time.Duration(i) * 37 * time.Minute).Add(time.Duration(i*i) * time.Millisecond)
		out = append(out, fmt.Sprint(at.UnixMilli()), fmt.Sprint(at.Unix()))
	}
	return out
}

// TestNumberSizesAreTheEngines: every number of numberSizes, 200 random
// numbers and 80 times are billed by DynamoDB Local (and by dynalite, but
// for the one case dynaliteMore names) exactly as itemsize.Number counts
// them: an item holding the number and padded to 1,024 bytes by that
// count is billed one write unit, and one byte more, two. A handful of
// them, the item padded to 400 KB, are accepted at that size and refused
// a byte over it. moto reports no consumed capacity and counts a number
// by its text: it is not a reference for sizes, and its subtest checks only that it
// still is not (notAReference).
func TestNumberSizesAreTheEngines(t *testing.T) {
	var all []string
	for _, c := range numberSizes {
		all = append(all, c.n)
	}
	all = append(all, randomNumbers(200)...)
	all = append(all, times()...)
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		if e.Kind == dynamotest.Moto {
			notAReference(t, e)
			return
		}
		ctx := context.Background()
		c := e.Client()
		table := e.CreateTable(t, "IdempotencyTable")
		seq := 0
		put := func(n string, pad int, units bool) (float64, error) {
			seq++
			item := map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("k%06d", seq)},
				"n":  &types.AttributeValueMemberN{Value: n},
				"p":  &types.AttributeValueMemberB{Value: make([]byte, pad)},
			}
			in := &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}
			if units {
				in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
			}
			out, err := c.PutItem(ctx, in)
			if err != nil {
				return 0, err
			}
			if !units {
				return 0, nil
			}
			return aws.ToFloat64(out.ConsumedCapacity.CapacityUnits), nil
		}
		// "pk", a 7-byte key, "n", "p": 11 bytes beside the number and
		// the pad.
		const rest = 11
		for _, n := range all {
			want := itemsize.Number(n)
			if e.Kind == dynamotest.Dynalite {
				want += dynaliteMore(n)
			}
			pad := itemsize.WriteUnit - rest - want
			at, err := put(n, pad, true)
			if err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			over, err := put(n, pad+1, true)
			if err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			if at != 1 || over != 2 {
				item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k000000"}, "n": &types.AttributeValueMemberN{Value: n}}
				size, err := dynamotest.EngineItemSize(ctx, c, table, item, "pk")
				t.Errorf("%s: counted %d bytes, the engine bills %d (%v)", n, want, size-len("pk")-len("k000000")-len("n"), err)
			}
		}
		for _, n := range []string{"1764720000120", "-120", "0.012", "123456789012345678901234567890123456780", "-1.5"} {
			pad := 400*1024 - rest - itemsize.Number(n)
			if _, err := put(n, pad, false); err != nil {
				t.Errorf("%s: an item of 400 KB by itemsize was refused: %v", n, err)
			}
			var api interface{ ErrorCode() string }
			_, err := put(n, pad+1, false)
			if !errors.As(err, &api) || api.ErrorCode() != "ValidationException" {
				t.Errorf("%s: an item a byte over 400 KB by itemsize: %v, want a ValidationException", n, err)
			}
		}
	})
}

// TestItemSizesAreTheEngines: items holding every attribute type, with
// numbers that pair up either way, at the top level, in lists, maps and
// number sets, are as large by itemsize.Of as DynamoDB Local and dynalite
// bill them (dynamotest.EngineItemSize).
func TestItemSizesAreTheEngines(t *testing.T) {
	n := func(s string) types.AttributeValue { return &types.AttributeValueMemberN{Value: s} }
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	items := []map[string]types.AttributeValue{
		{"pk": s("caller:v1:abc"), "expiresAtMs": n("1764806400010"), "expiresAt": n("1764806401"), "attempt": n("1"), "leaseUntil": n("1764720030010")},
		{"pk": s("k"), "l": &types.AttributeValueMemberL{Value: []types.AttributeValue{n("120"), n("-1.5"), s("ab"), &types.AttributeValueMemberBOOL{Value: true}}},
			"m":  &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"t": n("1764720000120"), "neg": n("-0.012"), "nul": &types.AttributeValueMemberNULL{Value: true}}},
			"ns": &types.AttributeValueMemberNS{Value: []string{"120", "-120", "0.012", "12345678901234567890123456789012345678"}},
			"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bc"}}, "bs": &types.AttributeValueMemberBS{Value: [][]byte{{1, 2}, {3}}},
			"b": &types.AttributeValueMemberB{Value: []byte("xyz")}},
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		if e.Kind == dynamotest.Moto {
			notAReference(t, e)
			return
		}
		c := e.Client()
		table := e.CreateTable(t, "IdempotencyTable")
		for i, item := range items {
			got, err := dynamotest.EngineItemSize(context.Background(), c, table, item, "pk")
			if err != nil {
				t.Fatal(err)
			}
			if want := itemsize.Of(item); got != want {
				t.Errorf("item %d: %d bytes by itemsize, %d billed by the engine", i, want, got)
			}
		}
	})
}

// notAReference checks what leaves moto out of the engines whose sizes
// are compared: it reports no consumed capacity that follows an item's
// size (and counts a number by its text). Should it start to, this fails,
// and moto belongs among the reference engines of these tests.
func notAReference(t *testing.T, e *dynamotest.Emulator) {
	t.Helper()
	table := e.CreateTable(t, "IdempotencyTable")
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}, "n": &types.AttributeValueMemberN{Value: "120"}}
	if size, err := dynamotest.EngineItemSize(context.Background(), e.Client(), table, item, "pk"); !errors.Is(err, dynamotest.ErrNoCapacity) {
		t.Fatalf("moto now reports write units that follow an item's size (%d bytes, %v): compare its sizes here too", size, err)
	}
}
