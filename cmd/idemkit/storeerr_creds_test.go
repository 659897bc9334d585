package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
)

// noAWSConfig leaves the default credential chain nothing to find: no
// keys in the environment, no shared files, no profile, no container or
// web-identity credentials and no instance metadata.
func noAWSConfig(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_DEFAULT_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		"AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_ROLE_ARN": "", "DYNAMODB_ENDPOINT": "", "HOME": dir,
	} {
		t.Setenv(k, v)
	}
}

// TestAWSConfigFailuresAreSaidPlainly: a command run against AWS (no
// --endpoint) on a machine with no credentials, or with no region, says so
// in a user's terms, with what to do, not as the SDK's chain ("get
// identity: get credentials: failed to refresh cached credentials, no EC2
// IMDS role found, operation error ec2imds: GetMetadata, ..." or "endpoint
// rule error, Invalid Configuration: Missing Region"). Failed before the
// fix: the messages were the SDK's.
func TestAWSConfigFailuresAreSaidPlainly(t *testing.T) {
	commands := [][]string{
		{"doctor", "--table", "IdempotencyTable=orders-idem", "--only", "idempotency"},
		{"effects", "list", "--table", "orders-effects"},
		{"apikey", "create", "--tenant", "acme", "--table", "orders-keys"},
	}
	check := func(t *testing.T, args []string, says ...string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		msg := errb.String()
		if code != 1 {
			t.Errorf("%v: exit %d, want 1\n%s", args, code, msg)
		}
		for _, s := range says {
			if !strings.Contains(msg, s) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, s, msg)
			}
		}
		for _, n := range append(sdkNoise, "get identity", "failed to refresh cached credentials", "ec2imds", "endpoint rule error") {
			if strings.Contains(msg, n) {
				t.Errorf("%v: stderr carries the SDK's %q:\n%s", args, n, msg)
			}
		}
	}
	t.Run("no credentials", func(t *testing.T) {
		noAWSConfig(t)
		t.Setenv("AWS_REGION", "eu-west-1")
		for _, args := range commands {
			check(t, args, "no AWS credentials", "AWS_PROFILE", "--endpoint")
		}
	})
	t.Run("no region", func(t *testing.T) {
		noAWSConfig(t)
		t.Setenv("AWS_ACCESS_KEY_ID", "test")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
		t.Setenv("AWS_REGION", "")
		t.Setenv("AWS_DEFAULT_REGION", "")
		for _, args := range commands {
			check(t, args, "no AWS region", "--region")
		}
	})
}

// TestCredentialRefusalIsNotSaidMissing: credentials the chain found but
// whose source refused them (an assumed role's AccessDenied, an expired
// token) are not "no AWS credentials": the message keeps the refusal's
// code and message, so the user fixes the role, not a sign-in.
func TestCredentialRefusalIsNotSaidMissing(t *testing.T) {
	refusal := &smithy.GenericAPIError{Code: "AccessDenied", Message: "User: arn:aws:iam::123456789012:user/ops is not authorized to perform: sts:AssumeRole"}
	err := fmt.Errorf("tables: describe orders-idem: %w", &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "DescribeTable",
		Err: fmt.Errorf("get identity: get credentials: failed to refresh cached credentials, %w",
			&smithy.OperationError{ServiceID: "STS", OperationName: "AssumeRole", Err: refusal})})
	msg := storeError(err)
	for _, s := range []string{"AccessDenied", "not authorized to perform: sts:AssumeRole", "credentials"} {
		if !strings.Contains(msg, s) {
			t.Errorf("%q lacks %q", msg, s)
		}
	}
	for _, n := range []string{"no AWS credentials", "get identity", "failed to refresh cached credentials"} {
		if strings.Contains(msg, n) {
			t.Errorf("%q says %q", msg, n)
		}
	}
}

// TestUnknownAWSProfileIsSaidPlainly: AWS_PROFILE naming a profile the
// shared files lack (a typo, a machine not set up) is said in a user's
// terms with what to do, not as "host: AWS config: failed to get shared
// config profile, NAME" (a Go package's label and the SDK's text). Failed
// before the fix: that text, from every command reaching AWS.
func TestUnknownAWSProfileIsSaidPlainly(t *testing.T) {
	noAWSConfig(t)
	t.Setenv("AWS_PROFILE", "prodd")
	for _, args := range [][]string{
		{"doctor", "--table", "IdempotencyTable=orders-idem", "--region", "eu-west-1"},
		{"effects", "list", "--table", "orders-effects", "--region", "eu-west-1"},
		{"effects", "show", "acme/e1-0123456789abcdef", "--table", "orders-effects", "--region", "eu-west-1"},
		{"apikey", "create", "--tenant", "acme", "--table", "orders-keys", "--region", "eu-west-1"},
		{"apikey", "revoke", "--hash", strings.Repeat("0", 64), "--table", "orders-keys", "--region", "eu-west-1"},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		msg := errb.String()
		want := `idemkit ` + strings.Join(args[:min(2, len(args))], " ")
		if args[0] == "doctor" {
			want = "idemkit doctor"
		}
		want += `: AWS profile "prodd" (AWS_PROFILE) is in neither the shared config nor the credentials file`
		if code != 1 || !strings.Contains(msg, want) || !strings.Contains(msg, "aws configure list-profiles") {
			t.Errorf("idemkit %v: exit %d, stderr %q; want 1 and %q", args, code, msg, want)
		}
		for _, s := range []string{"host: ", "AWS config: ", "failed to get shared config profile"} {
			if strings.Contains(msg, s) {
				t.Errorf("idemkit %v: stderr says %q: %q", args, s, msg)
			}
		}
	}
}

// TestAWSHostNotFoundNamesTheRegion: a command reaching AWS whose
// DynamoDB host does not resolve (a misspelt --region, a machine offline)
// says which host and asks about the region and the network, not "cannot
// reach the engine ...; is it running, and are --endpoint and --region
// right?", which is about an emulator the user did not give. Failed before
// the fix: that text.
func TestAWSHostNotFoundNamesTheRegion(t *testing.T) {
	noAWSConfig(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "example")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"effects", "list", "--table", "orders-effects", "--region", "eu-wset-1"}, &out, &errb)
	msg := errb.String()
	want := "idemkit effects list: DynamoDB Scan failed: cannot reach DynamoDB at dynamodb.eu-wset-1.amazonaws.com"
	if code != 1 || !strings.Contains(msg, want) || !strings.Contains(msg, "is the region right (--region") {
		t.Fatalf("exit %d, stderr %q; want 1 and %q", code, msg, want)
	}
	for _, s := range []string{"engine", "--endpoint and"} {
		if strings.Contains(msg, s) {
			t.Errorf("stderr says %q: %q", s, msg)
		}
	}
}
