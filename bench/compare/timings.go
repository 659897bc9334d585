package main

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// timings collects the latencies (µs) of named calls, for the experiments
// that time several write shapes side by side (exprCost, ledgerShapeCost).
type timings map[string][]float64

// time runs f and records how long it took under name; f's error is
// returned, prefixed with name, and then nothing is recorded.
func (tm timings) time(name string, f func() error) error {
	t0 := time.Now()
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	tm[name] = append(tm[name], float64(time.Since(t0).Nanoseconds())/1e3)
	return nil
}

// p50 is the median latency (µs) of each name.
func (tm timings) p50() map[string]float64 {
	out := map[string]float64{}
	for k, xs := range tm {
		out[k] = pct(xs, 50)
	}
	return out
}

// putClaim is the claim both experiments time: a PutItem of item that
// succeeds when no item has its key or the one there expired (expiresAtMs
// at or before now, a number attribute value).
func putClaim(ctx context.Context, c *dynamodb.Client, table string, item map[string]types.AttributeValue, now types.AttributeValue) error {
	_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item,
		ConditionExpression:       aws.String("attribute_not_exists(#k) OR #e <= :n"),
		ExpressionAttributeNames:  map[string]string{"#k": "pk", "#e": "expiresAtMs"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": now}})
	return err
}
