package kit_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger/fence"
	fencedynamo "github.com/idemkit/idemkit/ledger/fence/dynamostore"
)

// A function in a replica region takes fencing tokens from the home
// region's FenceTable through FenceClient; with its own region's client the
// table does not exist there (moto keeps each region's tables apart), so the
// fence fails closed rather than issuing a replica-local token.
func TestFenceClientCallsHomeRegion(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	home, replica := e.InRegion("eu-west-1"), e.InRegion("us-east-1")
	table := home.CreateTable(t, "FenceTable")
	local := replica.Client()
	if c := kit.FenceClient(local, ""); c != local {
		t.Fatal("no FENCE_TABLE_REGION: want the function's own client")
	}
	if c := kit.FenceClient(local, "us-east-1"); c != local {
		t.Fatal("FENCE_TABLE_REGION = own region: want the function's own client")
	}
	fc := kit.FenceClient(local, "eu-west-1")
	if got := fc.Options().Region; got != "eu-west-1" {
		t.Fatalf("fence client region %q", got)
	}
	if local.Options().Region != "us-east-1" {
		t.Fatal("FenceClient changed the function's own client")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o, err := fence.New(fence.Config{Store: fenceStore(t, fc, table), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := o.Token(ctx, "acme/effect-1")
	if err != nil || tok == 0 {
		t.Fatalf("token from the home region: %d, %v", tok, err)
	}
	if err := o.Pass(ctx, "acme/effect-1", tok); err != nil {
		t.Fatalf("pass: %v", err)
	}
	it, err := fenceStore(t, home.Client(), table).Get(ctx, "acme/effect-1")
	if err != nil || it == nil {
		t.Fatalf("home-region item: %+v, %v", it, err)
	}
	wrong, err := fence.New(fence.Config{Store: fenceStore(t, local, table), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Token(ctx, "acme/effect-2"); err == nil {
		t.Fatal("the replica region's own client found a fence table: the test does not separate regions")
	}
}

// HomeClient is the one helper for both home-owned tables: it keeps the
// caller's client for its own region and otherwise signs for the home
// region without touching the caller's client.
func TestHomeClient(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	local := e.InRegion("us-east-1").Client()
	if kit.HomeClient(local, "") != local || kit.HomeClient(local, "us-east-1") != local {
		t.Fatal("own region: want the function's own client")
	}
	hc := kit.HomeClient(local, "eu-west-1")
	if hc.Options().Region != "eu-west-1" || local.Options().Region != "us-east-1" {
		t.Fatalf("home %q local %q", hc.Options().Region, local.Options().Region)
	}
	if aws.ToString(hc.Options().BaseEndpoint) != aws.ToString(local.Options().BaseEndpoint) {
		t.Fatal("HomeClient dropped the endpoint override")
	}
}

// fenceStore is fencedynamo.New for a test: a Config error fails it.
func fenceStore(t *testing.T, client fencedynamo.API, table string) *fencedynamo.Store {
	t.Helper()
	st, err := fencedynamo.New(fencedynamo.Config{Client: client, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
