// Command barelambda is the cold-start benchmark's reference: a bare
// aws-lambda-go handler that answers every event with an empty object,
// built and started exactly as the functions are.
package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(context.Context, json.RawMessage) (map[string]string, error) {
		return map[string]string{}, nil
	})
}
