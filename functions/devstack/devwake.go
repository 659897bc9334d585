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
type tableWaker struct {
	mu      sync.RWMutex
	byTable map[string][]chan<- struct{}
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
				out, md, err := next.HandleInitialize(ctx, in)
				if all, tables := writtenTables(in.Parameters); (all || len(tables) > 0) && !refused(err) {
					w.wrote(all, tables...)
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
