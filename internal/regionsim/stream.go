package regionsim

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Change is one stream record, with its images converted to the DynamoDB
// (not Streams) attribute types so they can be written back.
type Change struct {
	// Region is the region whose table stream carried it.
	Region string
	// Event is INSERT, MODIFY or REMOVE.
	Event string
	// Sequence is the stream sequence number.
	Sequence string
	// Keys, Old and New are the key and the images (Old is nil on INSERT,
	// New is nil on REMOVE).
	Keys, Old, New map[string]types.AttributeValue
}

// Reader reads one table's stream from the start (TRIM_HORIZON), shard by
// shard, remembering its position. Not safe for concurrent use.
type Reader struct {
	region  string
	db      *dynamodb.Client
	streams *dynamodbstreams.Client
	table   string
	arn     string
	iters   map[string]*string // shard id -> next iterator; nil value: shard closed and drained
}

// NewReader returns a Reader of table's stream in region.
func NewReader(region string, db *dynamodb.Client, streams *dynamodbstreams.Client, table string) *Reader {
	return &Reader{region: region, db: db, streams: streams, table: table, iters: map[string]*string{}}
}

// Read returns every change written since the last Read (possibly none).
func (r *Reader) Read(ctx context.Context) ([]Change, error) {
	if r.arn == "" {
		out, err := r.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(r.table)})
		if err != nil {
			return nil, fmt.Errorf("regionsim: DescribeTable: %w", err)
		}
		if out.Table.LatestStreamArn == nil {
			return nil, errors.New("regionsim: table " + r.table + " has no stream")
		}
		r.arn = *out.Table.LatestStreamArn
	}
	ds, err := r.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(r.arn)})
	if err != nil {
		return nil, fmt.Errorf("regionsim: DescribeStream: %w", err)
	}
	var out []Change
	for _, sh := range ds.StreamDescription.Shards {
		id := aws.ToString(sh.ShardId)
		it, seen := r.iters[id]
		if !seen {
			gi, err := r.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
				StreamArn: aws.String(r.arn), ShardId: sh.ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				return nil, fmt.Errorf("regionsim: GetShardIterator: %w", err)
			}
			it = gi.ShardIterator
		}
		for it != nil {
			gr, err := r.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
			if err != nil {
				return nil, fmt.Errorf("regionsim: GetRecords: %w", err)
			}
			for _, rec := range gr.Records {
				out = append(out, Change{
					Region: r.region, Event: string(rec.EventName),
					Sequence: aws.ToString(rec.Dynamodb.SequenceNumber),
					Keys:     convMap(rec.Dynamodb.Keys), Old: convMap(rec.Dynamodb.OldImage), New: convMap(rec.Dynamodb.NewImage),
				})
			}
			next := gr.NextShardIterator
			if len(gr.Records) == 0 {
				it = next
				break // caught up (an open shard always returns a next iterator)
			}
			it = next
		}
		r.iters[id] = it
	}
	return out, nil
}

// convMap converts Streams attribute values to DynamoDB attribute values
// (nil stays nil).
func convMap(m map[string]stypes.AttributeValue) map[string]types.AttributeValue {
	if m == nil {
		return nil
	}
	out, err := attributevalue.FromDynamoDBStreamsMap(m)
	if err != nil {
		panic(fmt.Sprintf("regionsim: %v", err)) // a union member this SDK does not know
	}
	return out
}

// canon renders an item canonically (sorted keys), to recognise the stream
// echo of a write the replicator made itself.
func canon(m map[string]types.AttributeValue) string {
	if m == nil {
		return "<none>"
	}
	var b strings.Builder
	canonMap(&b, m)
	return b.String()
}

func canonMap(b *strings.Builder, m map[string]types.AttributeValue) {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	b.WriteByte('{')
	for _, k := range ks {
		b.WriteString(strconv.Quote(k))
		b.WriteByte(':')
		canonValue(b, m[k])
		b.WriteByte(',')
	}
	b.WriteByte('}')
}

func canonValue(b *strings.Builder, v types.AttributeValue) {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		b.WriteString("S" + strconv.Quote(x.Value))
	case *types.AttributeValueMemberN:
		b.WriteString("N" + x.Value)
	case *types.AttributeValueMemberB:
		b.WriteString("B" + strconv.Quote(string(x.Value)))
	case *types.AttributeValueMemberBOOL:
		b.WriteString("BOOL" + strconv.FormatBool(x.Value))
	case *types.AttributeValueMemberNULL:
		b.WriteString("NULL")
	case *types.AttributeValueMemberSS:
		canonSet(b, "SS", x.Value)
	case *types.AttributeValueMemberNS:
		canonSet(b, "NS", x.Value)
	case *types.AttributeValueMemberBS:
		b.WriteString("BS")
		for _, e := range x.Value {
			b.WriteString(strconv.Quote(string(e)))
		}
	case *types.AttributeValueMemberL:
		b.WriteString("L[")
		for _, e := range x.Value {
			canonValue(b, e)
			b.WriteByte(',')
		}
		b.WriteByte(']')
	case *types.AttributeValueMemberM:
		b.WriteString("M")
		canonMap(b, x.Value)
	}
}

// canonSet renders a string or number set: kind, then its members sorted.
func canonSet(b *strings.Builder, kind string, members []string) {
	s := append([]string(nil), members...)
	sort.Strings(s)
	b.WriteString(kind + strings.Join(s, "\x00"))
}
