package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// exprVariant is one shape of a Layer-1 completion write, applied to a
// freshly claimed pending item: what the engine spends on each shape
// (attribute count, REMOVEs, condition form) with everything else equal.
type exprVariant struct {
	name   string
	update string
	cond   string
	names  []string // #0.. in order
	values []string // value kinds of :0.. (o owner, p pending, n now, s state, e expMs, t ttl, r blob, x status/len, c enc, h sha)
	put    bool     // complete with a conditional PutItem of the whole item instead
}

// The parts the variants share: the previous completion's attributes
// (8 SET, 3 REMOVE), the current one's (4 SET), and the two condition forms.
const (
	prevUpdate  = "REMOVE #3, #4, #5 SET #1 = :3, #2 = :4, #6 = :5, #7 = :6, #8 = :7, #9 = :8, #10 = :9, #11 = :10"
	set4Update  = "SET #1 = :3, #2 = :4, #3 = :5, #4 = :6"
	builderCond = "(#0 = :0) AND (#1 = :1) AND ((attribute_not_exists (#2)) OR (#2 > :2))"
	flatOrCond  = "#0 = :0 AND #1 = :1 AND (attribute_not_exists(#2) OR #2 > :2)"
)

var (
	prevNames  = []string{"owner", "state", "expiresAtMs", "leaseAt", "respChunks", "respNonce", "expiresAt", "status", "respEnc", "respSha", "respLen", "resp"}
	prevValues = []string{"o", "p", "n", "s", "e", "t", "x", "c", "h", "x", "r"}
	set4Names  = []string{"owner", "state", "expiresAtMs", "expiresAt", "resp"}
	set4Values = []string{"o", "p", "n", "s", "e", "t", "r"}
)

var exprVariants = []exprVariant{
	{name: "builder form, 8 SET 3 REMOVE, nested condition (previous completion)",
		update: prevUpdate, cond: builderCond, names: prevNames, values: prevValues},
	{name: "same attributes, flat condition with OR",
		update: prevUpdate, cond: flatOrCond, names: prevNames, values: prevValues},
	{name: "4 SET, builder-form condition",
		update: set4Update, cond: builderCond, names: set4Names, values: set4Values},
	{name: "4 SET, flat condition with OR",
		update: set4Update, cond: flatOrCond, names: set4Names, values: set4Values},
	{name: "4 SET, flat condition with NOT (current completion)",
		update: set4Update, cond: "#0 = :0 AND #1 = :1 AND NOT #2 <= :2", names: set4Names, values: set4Values},
	{name: "4 SET, owner only (no state or expiry check: not enough)",
		update: "SET #1 = :1, #2 = :2, #3 = :3, #4 = :4",
		cond:   "#0 = :0",
		names:  set4Names,
		values: []string{"o", "s", "e", "t", "r"}},
	{name: "4 SET, no condition (Powertools' completion shape)",
		update: "SET #0 = :0, #1 = :1, #2 = :2, #3 = :3",
		names:  []string{"state", "expiresAtMs", "expiresAt", "resp"},
		values: []string{"s", "e", "t", "r"}},
	{name: "whole item PutItem, flat condition", put: true},
}

// exprCost times each variant on n fresh pending items per round (rounds
// interleaved) and returns the p50 (µs) of each, and of the plain PutItem
// floor and the pending-item claim PutItem measured alongside.
func exprCost(ctx context.Context, c *dynamodb.Client, table, floorTable string, n, rounds int) (map[string]float64, error) {
	now := time.Now().UnixMilli()
	blob := make([]byte, 120)
	blob[0] = 1
	val := func(k string) types.AttributeValue {
		switch k {
		case "o":
			return &types.AttributeValueMemberS{Value: "0123456789abcdef0123456789abcdef"}
		case "p":
			return &types.AttributeValueMemberS{Value: "pending"}
		case "n":
			return &types.AttributeValueMemberN{Value: strconv.FormatInt(now, 10)}
		case "s":
			return &types.AttributeValueMemberS{Value: "completed"}
		case "e":
			return &types.AttributeValueMemberN{Value: strconv.FormatInt(now+86_400_000, 10)}
		case "t":
			return &types.AttributeValueMemberN{Value: strconv.FormatInt(now/1000+86_401, 10)}
		case "x":
			return &types.AttributeValueMemberN{Value: "201"}
		case "c":
			return &types.AttributeValueMemberS{Value: "raw"}
		case "h":
			return &types.AttributeValueMemberB{Value: make([]byte, 32)}
		}
		return &types.AttributeValueMemberB{Value: blob}
	}
	pending := func(id string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: id}, "digest": &types.AttributeValueMemberS{Value: "openwop-request-v1:sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
			"state": val("p"), "owner": val("o"), "leaseAt": val("n"), "attempt": &types.AttributeValueMemberN{Value: "1"},
			"requestId": &types.AttributeValueMemberS{Value: "req-abcdefgh-1234"}, "expiresAtMs": val("e"), "expiresAt": val("t"),
		}
	}
	lat := timings{}
	for r := 0; r < rounds; r++ {
		for vi, v := range exprVariants {
			for i := 0; i < n; i++ {
				id := fmt.Sprintf("caller:v1:exprcost-r%d-v%d-%d", r, vi, i)
				if err := lat.time("claim PutItem (pending item, flat condition)", func() error {
					return putClaim(ctx, c, table, pending(id), val("n"))
				}); err != nil {
					return nil, err
				}
				if vi == 0 {
					if err := lat.time("plain PutItem floor", func() error {
						_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(floorTable), Item: map[string]types.AttributeValue{
							"pk": &types.AttributeValueMemberS{Value: id}, "v": &types.AttributeValueMemberS{Value: "x"}}})
						return err
					}); err != nil {
						return nil, err
					}
				}
				if err := lat.time(v.name, func() error {
					if v.put {
						it := pending(id)
						it["state"], it["resp"] = val("s"), val("r")
						_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it,
							ConditionExpression:       aws.String("#o = :o AND #s = :p AND NOT #e <= :n"),
							ExpressionAttributeNames:  map[string]string{"#o": "owner", "#s": "state", "#e": "expiresAtMs"},
							ExpressionAttributeValues: map[string]types.AttributeValue{":o": val("o"), ":p": val("p"), ":n": val("n")}})
						return err
					}
					in := &dynamodb.UpdateItemInput{TableName: aws.String(table),
						Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}},
						UpdateExpression:          aws.String(v.update),
						ExpressionAttributeNames:  map[string]string{},
						ExpressionAttributeValues: map[string]types.AttributeValue{}}
					for j, nm := range v.names {
						in.ExpressionAttributeNames["#"+strconv.Itoa(j)] = nm
					}
					for j, k := range v.values {
						in.ExpressionAttributeValues[":"+strconv.Itoa(j)] = val(k)
					}
					if v.cond != "" {
						in.ConditionExpression = aws.String(v.cond)
					}
					_, err := c.UpdateItem(ctx, in)
					return err
				}); err != nil {
					return nil, err
				}
			}
		}
	}
	return lat.p50(), nil
}
