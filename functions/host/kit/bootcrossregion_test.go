package kit_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// envBootHelper makes TestBootHelper boot as the api function does.
const envBootHelper = "IDEMKIT_TEST_BOOT_HELPER"

// TestBootHelper is the process TestBootChecksTheHomesCrossRegion starts:
// kit.Boot as the api function's main calls it, then "booted" on stdout.
// Run as a test it does nothing.
func TestBootHelper(t *testing.T) {
	if os.Getenv(envBootHelper) != "1" {
		return
	}
	kit.Boot("api")
	fmt.Println("booted")
}

// TestBootChecksTheHomesCrossRegion: kit.Boot, the start-up of the api and
// executor functions, reads the home stack's CrossRegion from its fence
// table's tag (HOME_FENCE_TABLE_ARN) and ends the process, an init error,
// when it is not this stack's; under the same posture it starts (RED_TEAM
// 537). Against moto, in a process of its own, as Lambda runs it.
func TestBootChecksTheHomesCrossRegion(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	fence := e.CreateTable(t, "FenceTable")
	arn := "arn:aws:dynamodb:" + e.Region + ":123456789012:table/" + fence
	if _, err := e.Client().TagResource(context.Background(), &dynamodb.TagResourceInput{ResourceArn: aws.String(arn),
		Tags: []types.Tag{{Key: aws.String(kit.TagCrossRegion), Value: aws.String(settings.CrossRegionFenced)}}}); err != nil {
		t.Fatal(err)
	}
	boot := func(posture string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBootHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), envBootHelper+"=1",
			"AWS_REGION="+e.Region, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_SESSION_TOKEN=",
			settings.EnvDynamoDBEndpoint+"="+e.Endpoint, settings.EnvCrossRegion+"="+posture,
			settings.EnvFenceTable+"="+fence, settings.EnvFenceTableRegion+"="+e.Region, settings.EnvHomeFenceTableARN+"="+arn)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := boot(settings.CrossRegionReconciled); err == nil || !strings.Contains(out, "api: cross-region") || strings.Contains(out, "booted") {
		t.Fatalf("reconciled-records under a fenced-effects home: err %v, output %s; want the process ended at api: cross-region", err, out)
	}
	if out, err := boot(settings.CrossRegionFenced); err != nil || !strings.Contains(out, "booted") {
		t.Fatalf("fenced-effects under a fenced-effects home: err %v, output %s; want it booted", err, out)
	}
}
