package main

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSDKLogLinesStayOffStderr: where the instance metadata refuses a
// token (a container on an instance whose metadata hop limit stops the
// answer, a proxy's 403), the SDK wrote its own line, "SDK 2026/12/07
// 10:58:48 WARN falling back to IMDSv1: operation error ec2imds:
// getToken, ...", to the process's stderr before the command's one line
// saying what failed and what to do (RED_TEAM 415). The binary itself is
// run (the SDK writes to the process's stderr, not the command's writer),
// with an instance-metadata stand-in answering 403 and no other
// credentials: stderr holds the command's line alone. Failed before: two
// lines, the SDK's first.
func TestSDKLogLinesStayOffStderr(t *testing.T) {
	noAWSConfig(t)
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer imds.Close()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	cmd := exec.Command(os.Args[0], "apikey", "create", "--tenant", "acme", "--table", "orders-keys", "--region", "eu-west-1")
	cmd.Env = append(os.Environ(), envRunAsCLI+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if cmd.ProcessState.ExitCode() != 1 || stdout.Len() != 0 || len(lines) != 1 ||
		!strings.HasPrefix(lines[0], "idemkit apikey create: ") || !strings.Contains(lines[0], "no AWS credentials") {
		t.Fatalf("exit %d stdout %q stderr %q; want 1 and the command's one line on the missing credentials", cmd.ProcessState.ExitCode(), stdout.String(), stderr.String())
	}
}
