package dynamotest

import (
	"context"
	"errors"
	"maps"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/internal/itemsize"
)

// Meter computes what the DynamoDB calls of the clients it is installed on
// (dynamodb.New / Emulator.Client option m.Middleware()) are billed, from
// item sizes with DynamoDB's rules (internal/itemsize), under both readings
// of AWS's rule for a write:
//
//   - "larger": a write is billed for the larger of the item before and
//     after it, whether its condition holds or fails;
//   - "existing": a write whose condition fails is billed for the existing
//     item's size (at least one unit); one that succeeds as above.
//
// Reads are billed as strongly consistent (the stores read nothing else):
// per started 4 KB of each item returned, at least one unit, an absent item
// one unit; a Query per started 4 KB of its page. A transactional write is
// billed twice a plain one. To know the item before a write, the meter reads
// it (consistently, through raw, a client without the meter) before passing
// the call on, and after an UpdateItem; those reads are not counted. It is
// meant for sequential tests: a concurrent write to the same item between
// the meter's read and the call makes the figure approximate.
type Meter struct {
	raw  *dynamodb.Client
	keys []string

	mu sync.Mutex
	u  Units
}

// Units is what a sequence of calls is billed.
type Units struct {
	// Calls counts API calls per operation (however many attempts).
	Calls map[string]int
	// WriteExisting and WriteLarger are the write units under the two
	// readings of the rule (see Meter).
	WriteExisting, WriteLarger int
	// Read is the strongly consistent read units.
	Read int
	// MaxItem is the largest item (bytes) written, replaced or read.
	MaxItem int
}

// Total is the number of API calls.
func (u Units) Total() int {
	n := 0
	for _, c := range u.Calls {
		n += c
	}
	return n
}

// NewMeter returns a Meter whose item reads go through raw (a client
// without the meter); keys names the tables' key attributes (a partition
// key "pk", and "sk" where the table has one).
func NewMeter(raw *dynamodb.Client, keys ...string) *Meter {
	return &Meter{raw: raw, keys: keys, u: Units{Calls: map[string]int{}}}
}

// Take returns the units since the last Take (or NewMeter) and resets them.
func (m *Meter) Take() Units {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.u
	u.Calls = maps.Clone(u.Calls)
	m.u = Units{Calls: map[string]int{}}
	return u
}

// Middleware returns the client option that installs the meter.
func (m *Meter) Middleware() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("dynamotest.Meter",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					return m.meter(ctx, in, next)
				}), middleware.Before)
		})
	}
}

// write is one item a write touches: its table, key and new image (nil for
// an update or a delete).
type write struct {
	table  *string
	key    map[string]types.AttributeValue
	item   map[string]types.AttributeValue
	delete bool
	update bool
}

func (m *Meter) meter(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	op := middleware.GetOperationName(ctx)
	var ws []write
	switch p := in.Parameters.(type) {
	case *dynamodb.PutItemInput:
		ws = []write{{table: p.TableName, key: m.keyOf(p.Item), item: p.Item}}
	case *dynamodb.UpdateItemInput:
		ws = []write{{table: p.TableName, key: p.Key, update: true}}
	case *dynamodb.DeleteItemInput:
		ws = []write{{table: p.TableName, key: p.Key, delete: true}}
	case *dynamodb.TransactWriteItemsInput:
		for _, ti := range p.TransactItems {
			switch {
			case ti.Put != nil:
				ws = append(ws, write{table: ti.Put.TableName, key: m.keyOf(ti.Put.Item), item: ti.Put.Item})
			case ti.Update != nil:
				ws = append(ws, write{table: ti.Update.TableName, key: ti.Update.Key, update: true})
			case ti.Delete != nil:
				ws = append(ws, write{table: ti.Delete.TableName, key: ti.Delete.Key, delete: true})
			case ti.ConditionCheck != nil:
				ws = append(ws, write{table: ti.ConditionCheck.TableName, key: ti.ConditionCheck.Key})
			}
		}
	}
	before := make([]int, len(ws))
	for i, w := range ws {
		before[i] = m.size(ctx, w.table, w.key)
	}
	out, md, err := next.HandleInitialize(ctx, in)

	var u Units
	failed := false
	var ccf *types.ConditionalCheckFailedException
	var tce *types.TransactionCanceledException
	switch {
	case err == nil:
	case errors.As(err, &ccf) || errors.As(err, &tce):
		failed = true
	default:
		// Refused or not answered: nothing is billed.
		m.add(op, Units{})
		return out, md, err
	}
	factor := 1
	if len(ws) > 0 && op == "TransactWriteItems" {
		factor = 2
	}
	for i, w := range ws {
		after := before[i]
		switch {
		case w.item != nil:
			after = itemsize.Of(w.item)
		case w.update && !failed:
			after = m.size(ctx, w.table, w.key)
		}
		larger := max(before[i], after)
		u.MaxItem = max(u.MaxItem, larger)
		u.WriteLarger += factor * itemsize.WriteUnits(larger)
		if failed {
			u.WriteExisting += factor * itemsize.WriteUnits(before[i])
		} else {
			u.WriteExisting += factor * itemsize.WriteUnits(larger)
		}
	}
	if err == nil {
		switch r := out.Result.(type) {
		case *dynamodb.GetItemOutput:
			n := itemsize.Of(r.Item)
			u.Read, u.MaxItem = itemsize.ReadUnits(n), n
		case *dynamodb.BatchGetItemOutput:
			p := in.Parameters.(*dynamodb.BatchGetItemInput)
			asked, got := 0, 0
			for t, ka := range p.RequestItems {
				asked += len(ka.Keys)
				if un, ok := r.UnprocessedKeys[t]; ok {
					asked -= len(un.Keys)
				}
			}
			for _, items := range r.Responses {
				for _, it := range items {
					n := itemsize.Of(it)
					u.Read += itemsize.ReadUnits(n)
					u.MaxItem = max(u.MaxItem, n)
					got++
				}
			}
			u.Read += max(0, asked-got) // absent keys
		case *dynamodb.QueryOutput:
			n := 0
			for _, it := range r.Items {
				n += itemsize.Of(it)
				u.MaxItem = max(u.MaxItem, itemsize.Of(it))
			}
			u.Read = itemsize.ReadUnits(n)
		}
	}
	m.add(op, u)
	return out, md, err
}

func (m *Meter) add(op string, u Units) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.u.Calls[op]++
	m.u.WriteExisting += u.WriteExisting
	m.u.WriteLarger += u.WriteLarger
	m.u.Read += u.Read
	m.u.MaxItem = max(m.u.MaxItem, u.MaxItem)
}

func (m *Meter) keyOf(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	k := make(map[string]types.AttributeValue, len(m.keys))
	for _, a := range m.keys {
		if v, ok := item[a]; ok {
			k[a] = v
		}
	}
	return k
}

// size is the size of the item under key now (0 when absent or unreadable).
func (m *Meter) size(ctx context.Context, table *string, key map[string]types.AttributeValue) int {
	if table == nil || len(key) == 0 {
		return 0
	}
	out, err := m.raw.GetItem(context.WithoutCancel(ctx), &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0
	}
	return itemsize.Of(out.Item)
}
