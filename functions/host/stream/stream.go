package stream

import (
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// StreamRecord is one DynamoDB stream record, the same whether it came from
// a Lambda event source mapping (FromLambda) or from polling the stream with
// the dynamodbstreams client (FromStreams, `idemkit dev`).
type StreamRecord struct {
	// EventID identifies the record (for partial batch failures).
	EventID string
	// EventName is INSERT, MODIFY or REMOVE.
	EventName string
	// Keys, NewImage and OldImage are the item images (nil when absent).
	Keys, NewImage, OldImage map[string]types.AttributeValue
	// PrincipalID and IdentityType are the record's userIdentity; a TTL
	// deletion carries "dynamodb.amazonaws.com" / "Service".
	PrincipalID, IdentityType string
	// Created is the record's ApproximateCreationDateTime: when DynamoDB
	// made the change in this table (a replicated write: when it reached
	// this region), rounded down to the second on DynamoDB's clock; zero
	// when not known.
	Created time.Time
}

// TTLPrincipal is the userIdentity principal of TTL deletions.
const TTLPrincipal = "dynamodb.amazonaws.com"

// TTLDeletion reports whether r is a REMOVE made by DynamoDB's TTL sweep.
func (r StreamRecord) TTLDeletion() bool {
	return r.EventName == "REMOVE" && r.PrincipalID == TTLPrincipal
}

// FromStreams converts a dynamodbstreams record.
func FromStreams(rec streamtypes.Record) (StreamRecord, error) {
	out := StreamRecord{EventName: string(rec.EventName)}
	if rec.EventID != nil {
		out.EventID = *rec.EventID
	}
	if rec.UserIdentity != nil {
		if rec.UserIdentity.PrincipalId != nil {
			out.PrincipalID = *rec.UserIdentity.PrincipalId
		}
		if rec.UserIdentity.Type != nil {
			out.IdentityType = *rec.UserIdentity.Type
		}
	}
	if d := rec.Dynamodb; d != nil {
		if d.ApproximateCreationDateTime != nil {
			out.Created = *d.ApproximateCreationDateTime
		}
		var err error
		if out.Keys, err = streamsMap(d.Keys); err != nil {
			return out, err
		}
		if out.NewImage, err = streamsMap(d.NewImage); err != nil {
			return out, err
		}
		if out.OldImage, err = streamsMap(d.OldImage); err != nil {
			return out, err
		}
	}
	return out, nil
}

// streamsMap converts one image of a dynamodbstreams record: nil when the
// record has none (an INSERT's old image, a REMOVE's new one), as
// FromLambda gives it. attributevalue.FromDynamoDBStreamsMap makes an
// empty map of a nil one, and the auditor, which reads the new image when
// there is one, took a REMOVE's empty new image for the item's and
// audited an effect record's deletion as a Layer-1 record's under
// `idemkit dev` (RED_TEAM 350).
func streamsMap(m map[string]streamtypes.AttributeValue) (map[string]types.AttributeValue, error) {
	if m == nil {
		return nil, nil
	}
	return attributevalue.FromDynamoDBStreamsMap(m)
}

// FromLambda converts a Lambda DynamoDB event record.
func FromLambda(rec events.DynamoDBEventRecord) (StreamRecord, error) {
	out := StreamRecord{EventID: rec.EventID, EventName: rec.EventName, Created: rec.Change.ApproximateCreationDateTime.Time}
	if rec.UserIdentity != nil {
		out.PrincipalID, out.IdentityType = rec.UserIdentity.PrincipalID, rec.UserIdentity.Type
	}
	var err error
	if out.Keys, err = lambdaMap(rec.Change.Keys); err != nil {
		return out, err
	}
	if out.NewImage, err = lambdaMap(rec.Change.NewImage); err != nil {
		return out, err
	}
	if out.OldImage, err = lambdaMap(rec.Change.OldImage); err != nil {
		return out, err
	}
	return out, nil
}

func lambdaMap(m map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]types.AttributeValue, len(m))
	for k, v := range m {
		av, err := lambdaAV(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", k, err)
		}
		out[k] = av
	}
	return out, nil
}

func lambdaAV(v events.DynamoDBAttributeValue) (types.AttributeValue, error) {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}, nil
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}, nil
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}, nil
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}, nil
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}, nil
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}, nil
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}, nil
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}, nil
	case events.DataTypeList:
		l := v.List()
		out := make([]types.AttributeValue, 0, len(l))
		for _, e := range l {
			av, err := lambdaAV(e)
			if err != nil {
				return nil, err
			}
			out = append(out, av)
		}
		return &types.AttributeValueMemberL{Value: out}, nil
	case events.DataTypeMap:
		m, err := lambdaMap(v.Map())
		if err != nil {
			return nil, err
		}
		return &types.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("unknown attribute type %v", v.DataType())
}
