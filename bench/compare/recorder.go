package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/itemsize"
)

// recorder is a loopback proxy in front of an engine that records every
// DynamoDB call passing through it (operation, bytes in and out, attributes
// written, condition, time at the engine) and the capacity it costs: the
// engine's own figure (it adds ReturnConsumedCapacity TOTAL to every
// request; the emulators do not check signatures) and one computed from
// item sizes with DynamoDB's rules, by reading the item before and after
// each write. It is used only for the split/capacity pass, never while
// latencies are timed.
type recorder struct {
	upstream string
	api      *dynamodb.Client // direct to the engine: item reads, DescribeTable
	srv      *http.Server
	url      string

	mu     sync.Mutex
	tag    string
	calls  map[string][]call
	tables map[string]*types.TableDescription
}

// call is one recorded DynamoDB call.
type call struct {
	Op        string
	ReqBytes  int
	RespBytes int
	Engine    time.Duration
	Attrs     string // attributes written (item) or the update expression
	Condition string
	Failed    string  // error type, e.g. ConditionalCheckFailedException
	EngineCU  float64 // -1: the engine did not report capacity
	SizeCU    float64 // computed from item sizes (writes: WCU incl. GSI copies, the larger of the item before and after; reads: RCU)
	// ExistingCU is SizeCU under the other reading of AWS's rule for a
	// write whose condition fails: billed for the existing item's size
	// (at least one unit); for any other call, SizeCU.
	ExistingCU float64
	GSICU      float64 // the part of SizeCU paid for index copies
	ItemBytes  int     // item size after the call (writes) or read
}

func startRecorder(upstream string, api *dynamodb.Client) (*recorder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &recorder{upstream: upstream, api: api, calls: map[string][]call{}, tables: map[string]*types.TableDescription{}}
	r.url = "http://" + ln.Addr().String()
	r.srv = &http.Server{Handler: r}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *recorder) close() { _ = r.srv.Close() }

// setTag attributes the following calls to tag.
func (r *recorder) setTag(tag string) {
	r.mu.Lock()
	r.tag = tag
	r.mu.Unlock()
}

func (r *recorder) take(tag string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls[tag]
	delete(r.calls, tag)
	return c
}

var rccOps = map[string]bool{"PutItem": true, "UpdateItem": true, "DeleteItem": true, "GetItem": true, "Query": true,
	"BatchGetItem": true, "BatchWriteItem": true, "TransactWriteItems": true, "TransactGetItems": true, "Scan": true}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	target := req.Header.Get("X-Amz-Target")
	op := target[strings.LastIndexByte(target, '.')+1:]
	var in map[string]any
	_ = json.Unmarshal(body, &in)
	c := call{Op: op, ReqBytes: len(body), EngineCU: -1}
	if rccOps[op] && in != nil {
		in["ReturnConsumedCapacity"] = "TOTAL"
		body, _ = json.Marshal(in)
	}
	table, _ := in["TableName"].(string)
	var key, before map[string]types.AttributeValue
	if isWrite(op) && table != "" {
		key = r.keyOf(table, in)
		if key != nil {
			before = r.item(table, key)
		}
	}

	up, _ := http.NewRequest(req.Method, r.upstream+req.URL.Path, bytes.NewReader(body))
	up.Header = req.Header.Clone()
	up.ContentLength = int64(len(body))
	up.Header.Set("Content-Length", strconv.Itoa(len(body)))
	t0 := time.Now()
	resp, err := http.DefaultTransport.RoundTrip(up)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c.Engine = time.Since(t0)
	c.RespBytes = len(rb)
	for k, vs := range resp.Header {
		if k == "Content-Length" {
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(rb)

	var out map[string]any
	_ = json.Unmarshal(rb, &out)
	if resp.StatusCode >= 300 {
		t, _ := out["__type"].(string)
		c.Failed = t[strings.LastIndexByte(t, '#')+1:]
	}
	c.EngineCU = engineCU(out["ConsumedCapacity"])
	c.Condition, _ = in["ConditionExpression"].(string)
	c.Attrs = attrsOf(in)
	switch {
	case key != nil:
		after := r.item(table, key)
		c.ItemBytes = itemSize(after)
		c.SizeCU, c.GSICU = r.writeCU(table, in, before, after)
		c.ExistingCU = c.SizeCU
		if c.Failed == "ConditionalCheckFailedException" {
			c.ExistingCU = float64(itemsize.WriteUnits(itemSize(before)))
		}
	case op == "GetItem":
		if item, ok := out["Item"].(map[string]any); ok {
			c.ItemBytes = jsonItemSize(item)
		}
		rcu := math.Max(1, math.Ceil(float64(c.ItemBytes)/4096))
		if cr, _ := in["ConsistentRead"].(bool); !cr {
			rcu /= 2
		}
		c.SizeCU = rcu
	case op == "BatchGetItem":
		// Per item returned, started 4 KB (consistent) or half that.
		resps, _ := out["Responses"].(map[string]any)
		reqs, _ := in["RequestItems"].(map[string]any)
		for t, items := range resps {
			consistent := false
			if ka, ok := reqs[t].(map[string]any); ok {
				consistent, _ = ka["ConsistentRead"].(bool)
			}
			list, _ := items.([]any)
			for _, it := range list {
				m, _ := it.(map[string]any)
				n := jsonItemSize(m)
				c.ItemBytes = max(c.ItemBytes, n)
				u := float64(itemsize.ReadUnits(n))
				if !consistent {
					u /= 2
				}
				c.SizeCU += u
			}
		}
	}
	if c.ExistingCU == 0 {
		c.ExistingCU = c.SizeCU
	}
	r.mu.Lock()
	r.calls[r.tag] = append(r.calls[r.tag], c)
	r.mu.Unlock()
}

func isWrite(op string) bool { return op == "PutItem" || op == "UpdateItem" || op == "DeleteItem" }

// engineCU sums ConsumedCapacity (an object, or a list of them); -1 when absent.
func engineCU(v any) float64 {
	switch v := v.(type) {
	case map[string]any:
		if f, ok := v["CapacityUnits"].(float64); ok {
			return f
		}
	case []any:
		sum, any := 0.0, false
		for _, e := range v {
			if f := engineCU(e); f >= 0 {
				sum, any = sum+f, true
			}
		}
		if any {
			return sum
		}
	}
	return -1
}

func attrsOf(in map[string]any) string {
	if u, ok := in["UpdateExpression"].(string); ok {
		return u
	}
	item, ok := in["Item"].(map[string]any)
	if !ok {
		return ""
	}
	names := make([]string, 0, len(item))
	for k := range item {
		names = append(names, k)
	}
	sort.Strings(names)
	return "item{" + strings.Join(names, ",") + "}"
}

func (r *recorder) describe(table string) *types.TableDescription {
	r.mu.Lock()
	d := r.tables[table]
	r.mu.Unlock()
	if d != nil {
		return d
	}
	out, err := r.api.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return nil
	}
	r.mu.Lock()
	r.tables[table] = out.Table
	r.mu.Unlock()
	return out.Table
}

// keyOf extracts the primary key of the item a write names.
func (r *recorder) keyOf(table string, in map[string]any) map[string]types.AttributeValue {
	d := r.describe(table)
	if d == nil {
		return nil
	}
	src, _ := in["Key"].(map[string]any)
	if src == nil {
		src, _ = in["Item"].(map[string]any)
	}
	key := map[string]types.AttributeValue{}
	for _, ks := range d.KeySchema {
		v, ok := src[aws.ToString(ks.AttributeName)].(map[string]any)
		if !ok {
			return nil
		}
		switch {
		case v["S"] != nil:
			key[aws.ToString(ks.AttributeName)] = &types.AttributeValueMemberS{Value: v["S"].(string)}
		case v["N"] != nil:
			key[aws.ToString(ks.AttributeName)] = &types.AttributeValueMemberN{Value: v["N"].(string)}
		default:
			return nil
		}
	}
	return key
}

// item reads the item (consistently, straight from the engine); nil when
// absent.
func (r *recorder) item(table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	out, err := r.api.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil
	}
	return out.Item
}

// writeCU is the write capacity of one write with DynamoDB's rules: the
// larger of the item before and after, in started KB, at least 1 (a failed
// conditional write is charged as well); plus, per GSI, the projected copy
// in started KB when the write changes what the index holds for the item
// (its projected attributes or keys; an item without the index key is not
// in the index).
func (r *recorder) writeCU(table string, in map[string]any, before, after map[string]types.AttributeValue) (total, gsi float64) {
	size := max(itemSize(before), itemSize(after))
	if item, ok := in["Item"].(map[string]any); ok {
		size = max(size, jsonItemSize(item))
	}
	total = math.Max(1, math.Ceil(float64(size)/1024))
	d := r.describe(table)
	if d == nil {
		return total, 0
	}
	for _, g := range d.GlobalSecondaryIndexes {
		pb, pa := projected(d, g, before), projected(d, g, after)
		if reflect.DeepEqual(pb, pa) {
			continue
		}
		gsi += math.Max(1, math.Ceil(float64(max(itemSize(pb), itemSize(pa)))/1024))
	}
	return total + gsi, gsi
}

// projected is what index g holds for item: nil when the item lacks the
// index's keys.
func projected(d *types.TableDescription, g types.GlobalSecondaryIndexDescription, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	for _, ks := range g.KeySchema {
		if item[aws.ToString(ks.AttributeName)] == nil {
			return nil
		}
	}
	if g.Projection == nil || g.Projection.ProjectionType == types.ProjectionTypeAll {
		return item
	}
	keep := map[string]bool{}
	for _, ks := range append(append([]types.KeySchemaElement{}, d.KeySchema...), g.KeySchema...) {
		keep[aws.ToString(ks.AttributeName)] = true
	}
	for _, a := range g.Projection.NonKeyAttributes {
		keep[a] = true
	}
	p := map[string]types.AttributeValue{}
	for k, v := range item {
		if keep[k] {
			p[k] = v
		}
	}
	return p
}

// itemSize is DynamoDB's item size (internal/itemsize).
func itemSize(m map[string]types.AttributeValue) int { return itemsize.Of(m) }

func numSize(s string) int { return itemsize.Number(s) }

// jsonItemSize is itemSize for an item in the wire (JSON) form.
func jsonItemSize(m map[string]any) int {
	n := 0
	for k, v := range m {
		n += len(k) + jsonAVSize(v)
	}
	return n
}

func jsonAVSize(v any) int {
	av, _ := v.(map[string]any)
	for t, x := range av {
		switch t {
		case "S":
			s, _ := x.(string)
			return len(s)
		case "B":
			s, _ := x.(string)
			return len(s) * 3 / 4 // base64 on the wire
		case "N":
			s, _ := x.(string)
			return numSize(s)
		case "BOOL", "NULL":
			return 1
		case "L":
			n := 3
			l, _ := x.([]any)
			for _, e := range l {
				n += jsonAVSize(e) + 1
			}
			return n
		case "M":
			return 3 + jsonItemSize(x.(map[string]any)) + len(x.(map[string]any))
		case "SS", "NS", "BS":
			n := 0
			l, _ := x.([]any)
			for _, e := range l {
				s, _ := e.(string)
				n += len(s)
			}
			return n
		}
	}
	return 0
}
