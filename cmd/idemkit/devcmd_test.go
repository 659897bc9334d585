package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestDevAuthorizerTTLFlag: `idemkit dev -h` shows --authorizer-ttl
// defaulting to the deployed HTTP API's ReauthorizeEvery (5m), and a
// negative TTL is a usage error.
func TestDevAuthorizerTTLFlag(t *testing.T) {
	var usage bytes.Buffer
	if code := run(context.Background(), []string{"dev", "-h"}, &usage, io.Discard); code != 0 || !strings.Contains(usage.String(), "-authorizer-ttl") || !strings.Contains(usage.String(), "(default 5m0s)") {
		t.Fatalf("dev -h (exit %d) does not show --authorizer-ttl defaulting to 5m0s:\n%s", code, usage.String())
	}
	if code := run(context.Background(), []string{"dev", "--authorizer-ttl", "-1s"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("--authorizer-ttl -1s: exit %d, want 2", code)
	}
}

// TestDevAuthorizerTTL: `idemkit dev` keeps an authorizer decision for the
// template's ReauthorizeEvery by default, so a key removed from the
// api-keys table while dev runs is still granted (as deployed), and with
// --authorizer-ttl 0 the removal refuses the very next request.
func TestDevAuthorizerTTL(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("authttl%d-", time.Now().UnixNano())
	c := e.Client()
	table := prefix + "ApiKeysTable"
	for _, ttl := range []string{"", "0"} {
		args := []string{"--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--api-key", "idk_authttl_seed_0123456789=acme"}
		if ttl != "" {
			args = append(args, "--authorizer-ttl", ttl)
		}
		_, url := startDevInProcess(t, args...)
		key := apikeys.NewAPIKey()
		if err := (&apikeys.DynamoKeys{Client: c, Table: table}).PutKey(context.Background(), key, "acme"); err != nil {
			t.Fatal(err)
		}
		if code, m := devCall(t, "POST", url+"/runs", key, `{"workflowId":"conformance-noop"}`); code != 201 {
			t.Fatalf("ttl %q: a new key: %d %v", ttl, code, m)
		}
		if _, err := c.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: apikeys.HashKey(key)}}}); err != nil {
			t.Fatal(err)
		}
		code, m := devCall(t, "POST", url+"/runs", key, `{"workflowId":"conformance-noop"}`)
		if want := map[string]int{"": 201, "0": 401}[ttl]; code != want {
			t.Fatalf("--authorizer-ttl %q: the removed key got %d %v, want %d", ttl, code, m, want)
		}
	}
}

// TestDevTakenAddressSaysHowToPickAnother: when --addr is taken (another
// idemkit dev, another server) dev stops at once, before starting an
// engine, exits 1 and says which flag picks another address, also for
// make run.
func TestDevTakenAddressSaysHowToPickAnother(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"dev", "--addr", ln.Addr().String()}, &out, &errb)
	msg := errb.String()
	if code != 1 || !strings.Contains(msg, "address already in use") || !strings.Contains(msg, "--addr") || !strings.Contains(msg, "make run ARGS=") {
		t.Fatalf("exit %d, stderr %q: want 1 and a message naming --addr (and make run ARGS=)", code, msg)
	}
	if strings.Contains(msg, "started the DynamoDB engine") {
		t.Fatalf("an engine was started before the address was checked: %q", msg)
	}
}
