package runs

import (
	"errors"
	"fmt"

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
