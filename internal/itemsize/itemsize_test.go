package itemsize_test

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/itemsize"
)

func TestSizesFollowDynamoDBRules(t *testing.T) {
	cases := []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"string", map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "abc"}}, 5},
		{"binary", map[string]types.AttributeValue{"d": &types.AttributeValueMemberB{Value: make([]byte, 10)}}, 11},
		{"number: 2 digits per byte, plus 1", map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "1733220000123"}}, 1 + 7 + 1},
		{"number: zeros trimmed", map[string]types.AttributeValue{"n": &types.AttributeValueMemberN{Value: "1000"}}, 1 + 1 + 1},
		{"bool", map[string]types.AttributeValue{"ok": &types.AttributeValueMemberBOOL{Value: true}}, 3},
		{"list", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "ab"}}}}, 1 + 3 + 2 + 1},
		{"map", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "ab"}}}}, 1 + 3 + 1 + 2 + 1},
	}
	for _, c := range cases {
		if got := itemsize.Of(c.item); got != c.want {
			t.Errorf("%s: %d bytes, want %d", c.name, got, c.want)
		}
	}
}

func TestUnitsAreStartedKilobytes(t *testing.T) {
	for _, c := range []struct{ size, w, r int }{
		{0, 1, 1}, {1, 1, 1}, {1024, 1, 1}, {1025, 2, 1}, {4096, 4, 1}, {4097, 5, 2}, {400 << 10, 400, 100},
	} {
		if w, r := itemsize.WriteUnits(c.size), itemsize.ReadUnits(c.size); w != c.w || r != c.r {
			t.Errorf("%d bytes: %d write, %d read units; want %d, %d", c.size, w, r, c.w, c.r)
		}
	}
}

func Example() {
	item := map[string]types.AttributeValue{
		"pk":   &types.AttributeValueMemberS{Value: "caller:v1:abc"},
		"data": &types.AttributeValueMemberB{Value: make([]byte, 5000)},
	}
	size := itemsize.Of(item)
	fmt.Println(size, "bytes:", itemsize.WriteUnits(size), "write units,", itemsize.ReadUnits(size), "consistent read units")
	// Output: 5019 bytes: 5 write units, 2 consistent read units
}
