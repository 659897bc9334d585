package runs

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// conditionalWrite sorts the answer err of a conditional write: nil on
// success, failed when the condition failed, otherwise err wrapped with what.
func conditionalWrite(err, failed error, what string) error {
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return failed
	case err != nil:
		return fmt.Errorf("host: %s: %w", what, err)
	}
	return nil
}

// sameItem reports whether the stored item a holds exactly the attributes
// and values b does (b: an item this store sent, whose numbers are
// integers in canonical form, as every engine stores them). Numbers are
// compared as their text, never rounded through float64.
func sameItem(a, b map[string]types.AttributeValue) bool {
	if len(a) != len(b) {
		return false
	}
	exact := func(o *attributevalue.DecoderOptions) { o.UseNumber = true }
	var da, db map[string]any
	if attributevalue.UnmarshalMapWithOptions(a, &da, exact) != nil || attributevalue.UnmarshalMapWithOptions(b, &db, exact) != nil {
		return false
	}
	return reflect.DeepEqual(da, db)
}
