package devstack

import (
	"context"
	"errors"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// tableWaker wakes the stream poller of each table the stack writes to, and
// only those: it sits in the stack's DynamoDB client (option) and, once a
// write has been answered, signals the wake channel registered for every
// table the write named. A request that writes the idempotency and runs
// tables (every new run) wakes those two pollers; the effects poller stays
// idle until an effect is recorded. Writes of any part of the stack count
// alike: the api's, the executor's (a handled batch that wrote wakes the
// pollers of what it wrote), the resumer's and the seams'.
//
// A write the engine refused (a failed condition, a cancelled
// transaction) wrote nothing and wakes nothing; any other outcome, an
// error whose effect is unknown included, wakes the tables it named.
// PartiQL statements wake every registered table. Writes by other
// processes are not seen: their records wait for the poller's idle
// backoff (devIdlePoll at most), as before.
//
// On an engine without DynamoDB Streams it also hands the items the
// stack's successful puts and updates wrote to a table to that table's
// feed (feed; writeFeed), in place of the stream's records.
type tableWaker struct {
	mu      sync.RWMutex
	byTable map[string][]chan<- struct{}
	feeds   map[string]tableFeed
}

// tableFeed is where a table's writes go on an engine without streams: the
// feed, and get, a consistent read of an item by its key (an update's old
// image, and its new one when the update returns none).
type tableFeed struct {
	f   *writeFeed
	get func(ctx context.Context, table string, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error)
}

func newTableWaker() *tableWaker {
	return &tableWaker{byTable: map[string][]chan<- struct{}{}}
}

// register has writes to table signal c (non-blocking: a wake-up already
// pending is enough).
func (w *tableWaker) register(table string, c chan<- struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.byTable[table] = append(w.byTable[table], c)
}

// feed has every item a successful put of the stack writes to table
// (PutItem, a transaction's Put; the stack writes no run in a batch)
// handed to f as an INSERT once the engine has answered the write, and
// every item a successful UpdateItem changes handed to f as a MODIFY (an
// INSERT if the update created it), its old image read with get just
// before the write. One feed per table.
func (w *tableWaker) feed(table string, f *writeFeed, get func(ctx context.Context, table string, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.feeds == nil {
		w.feeds = map[string]tableFeed{}
	}
	w.feeds[table] = tableFeed{f: f, get: get}
}

// fedUpdate is the feed of the table an UpdateItem (params) writes, and
// the item's image just before it (nil if there was none); ok false when
// the table has no feed or the read failed (nothing is handed over).
func (w *tableWaker) fedUpdate(ctx context.Context, params any) (tf tableFeed, in *dynamodb.UpdateItemInput, old map[string]types.AttributeValue, ok bool) {
	in, _ = params.(*dynamodb.UpdateItemInput)
	if in == nil || in.TableName == nil {
		return tf, nil, nil, false
	}
	w.mu.RLock()
	tf, ok = w.feeds[*in.TableName]
	w.mu.RUnlock()
	if !ok {
		return tf, nil, nil, false
	}
	old, err := tf.get(ctx, *in.TableName, in.Key)
	return tf, in, old, err == nil
}

// updated hands the item in changed, from old, to tf's feed: its new image
// the one the update returned (ALL_NEW), else read.
func (w *tableWaker) updated(ctx context.Context, tf tableFeed, in *dynamodb.UpdateItemInput, out any, old map[string]types.AttributeValue) {
	var item map[string]types.AttributeValue
	if o, _ := out.(*dynamodb.UpdateItemOutput); o != nil && in.ReturnValues == types.ReturnValueAllNew {
		item = o.Attributes
	} else {
		var err error
		if item, err = tf.get(ctx, *in.TableName, in.Key); err != nil {
			return
		}
	}
	switch {
	case len(item) == 0:
	case len(old) == 0:
		tf.f.put(item)
	default:
		tf.f.modify(old, item)
	}
}

// put hands the items a successful write's input puts to their tables'
// feeds.
func (w *tableWaker) put(params any) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if len(w.feeds) == 0 {
		return
	}
	hand := func(table *string, item map[string]types.AttributeValue) {
		if table == nil || item == nil {
			return
		}
		if tf, ok := w.feeds[*table]; ok {
			tf.f.put(item)
		}
	}
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		hand(in.TableName, in.Item)
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			if it.Put != nil {
				hand(it.Put.TableName, it.Put.Item)
			}
		}
	}
}

// wrote wakes the pollers of tables; all, every registered table.
func (w *tableWaker) wrote(all bool, tables ...string) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	signal := func(cs []chan<- struct{}) {
		for _, c := range cs {
			select {
			case c <- struct{}{}:
			default:
			}
		}
	}
	if all {
		for _, cs := range w.byTable {
			signal(cs)
		}
		return
	}
	for _, t := range tables {
		signal(w.byTable[t])
	}
}

// option is the DynamoDB client option that reports the stack's writes to
// w once the engine has answered them.
func (w *tableWaker) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("idemkitTableWaker",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				tf, upd, old, fed := w.fedUpdate(ctx, in.Parameters)
				out, md, err := next.HandleInitialize(ctx, in)
				if all, tables := writtenTables(in.Parameters); (all || len(tables) > 0) && !refused(err) {
					w.wrote(all, tables...)
				}
				if err == nil {
					w.put(in.Parameters)
					if fed {
						w.updated(ctx, tf, upd, out.Result, old)
					}
				}
				return out, md, err
			}), middleware.After)
	})
}

// writtenTables names the tables a DynamoDB call's input writes to; all
// when it cannot tell (PartiQL). Reads name none.
func writtenTables(params any) (all bool, tables []string) {
	name := func(s *string) {
		if s != nil {
			tables = append(tables, *s)
		}
	}
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		name(in.TableName)
	case *dynamodb.UpdateItemInput:
		name(in.TableName)
	case *dynamodb.DeleteItemInput:
		name(in.TableName)
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				name(it.Put.TableName)
			case it.Update != nil:
				name(it.Update.TableName)
			case it.Delete != nil:
				name(it.Delete.TableName)
			}
		}
	case *dynamodb.BatchWriteItemInput:
		for t := range in.RequestItems {
			tables = append(tables, t)
		}
	case *dynamodb.ExecuteStatementInput, *dynamodb.BatchExecuteStatementInput, *dynamodb.ExecuteTransactionInput:
		all = true
	}
	return all, tables
}

// refused reports an error with which the engine wrote nothing for certain.
func refused(err error) bool {
	var cond *types.ConditionalCheckFailedException
	var cancelled *types.TransactionCanceledException
	return errors.As(err, &cond) || errors.As(err, &cancelled)
}
