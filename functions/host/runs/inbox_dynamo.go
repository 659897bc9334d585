package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// dynamoInbox is the RunsTable Inbox: one item per tenant, pk
// "#inbox/<tenant>", one attribute per entry ("e_<id>", the entry as JSON
// text). Every method is one round trip: Keep and Remove an UpdateItem,
// List and Get a strongly consistent GetItem. An item holds up to 400 KB,
// about three hundred waiting writes; a Keep beyond that fails (a 500, left
// to the same-key retry).
type dynamoInbox struct {
	// Client is the DynamoDB client. Required.
	Client DynamoAPI
	// Table is the RunsTable name. Required.
	Table string
}

const inboxEntryPrefix = "e_"

func inboxKey(tenant string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{runAttrPK: sAV(itemPrefix + "inbox/" + tenant)}
}

// Keep implements Inbox (SET e_<id>).
func (d *dynamoInbox) Keep(ctx context.Context, e InboxEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	expr, err := expression.NewBuilder().WithUpdate(expression.Set(expression.Name(inboxEntryPrefix+e.ID), expression.Value(string(b)))).Build()
	if err != nil {
		return err
	}
	_, err = d.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.Table), Key: inboxKey(e.Tenant), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	if err != nil {
		return fmt.Errorf("host: keep inbox entry: %w", err)
	}
	return nil
}

func (d *dynamoInbox) item(ctx context.Context, tenant string) (map[string]types.AttributeValue, error) {
	out, err := d.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.Table), Key: inboxKey(tenant), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("host: read inbox: %w", err)
	}
	return out.Item, nil
}

func decodeEntry(av types.AttributeValue, tenant string) (InboxEntry, bool) {
	s, ok := av.(*types.AttributeValueMemberS)
	if !ok {
		return InboxEntry{}, false
	}
	var e InboxEntry
	if json.Unmarshal([]byte(s.Value), &e) != nil || e.Tenant != tenant {
		return InboxEntry{}, false
	}
	return e, true
}

// List implements Inbox.
func (d *dynamoInbox) List(ctx context.Context, tenant string) ([]InboxEntry, error) {
	it, err := d.item(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := []InboxEntry{}
	for k, av := range it {
		if !strings.HasPrefix(k, inboxEntryPrefix) {
			continue
		}
		if e, ok := decodeEntry(av, tenant); ok {
			out = append(out, e)
		}
	}
	sortEntries(out)
	return out, nil
}

// Get implements Inbox.
func (d *dynamoInbox) Get(ctx context.Context, tenant, id string) (InboxEntry, error) {
	it, err := d.item(ctx, tenant)
	if err != nil {
		return InboxEntry{}, err
	}
	e, ok := decodeEntry(it[inboxEntryPrefix+id], tenant)
	if !ok {
		return InboxEntry{}, ErrInboxEntryNotFound
	}
	return e, nil
}

// Remove implements Inbox (REMOVE e_<id>, conditional on it existing).
func (d *dynamoInbox) Remove(ctx context.Context, tenant, id string) error {
	name := expression.Name(inboxEntryPrefix + id)
	expr, err := expression.NewBuilder().WithCondition(expression.AttributeExists(name)).WithUpdate(expression.Remove(name)).Build()
	if err != nil {
		return err
	}
	_, err = d.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.Table), Key: inboxKey(tenant), UpdateExpression: expr.Update(),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(),
	})
	return conditionalWrite(err, ErrInboxEntryNotFound, "remove inbox entry")
}
