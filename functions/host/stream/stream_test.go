package stream

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestFromLambda(t *testing.T) {
	rec := events.DynamoDBEventRecord{EventID: "1", EventName: "REMOVE", UserIdentity: &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: TTLPrincipal},
		Change: events.DynamoDBStreamRecord{OldImage: map[string]events.DynamoDBAttributeValue{
			"pk": events.NewStringAttribute("x"), "n": events.NewNumberAttribute("3"), "b": events.NewBooleanAttribute(true),
			"l":   events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"s": events.NewStringAttribute("escaped")})}),
			"bin": events.NewBinaryAttribute([]byte{1}), "null": events.NewNullAttribute(), "ss": events.NewStringSetAttribute([]string{"a"}),
		}}}
	sr, err := FromLambda(rec)
	if err != nil || !sr.TTLDeletion() {
		t.Fatal(sr, err)
	}
	l := sr.OldImage["l"].(*types.AttributeValueMemberL).Value[0].(*types.AttributeValueMemberM).Value["s"].(*types.AttributeValueMemberS)
	if l.Value != "escaped" || sr.OldImage["n"].(*types.AttributeValueMemberN).Value != "3" {
		t.Fatal(sr.OldImage)
	}
}
