package emulator

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// loopbackLauncher is loopback/LoopbackDynamoDBLocal.class, compiled from
// the .java file beside it (TestLoopbackLauncherMatchesSource): DynamoDB
// Local's own main, with its Jetty connectors bound to one host.
//
//go:embed loopback/LoopbackDynamoDBLocal.class
var loopbackLauncher []byte

// LoopbackHost is the interface DynamoDB Local listens on. DynamoDB Local
// 1.11.478 has no option for it (its -help lists -port, -inMemory,
// -dbPath, -sharedDb, -cors, -delayTransientStatuses and
// -optimizeDbBeforeStartup only) and binds every interface, so idemkit
// starts it through LoopbackDynamoDBLocal, a 40-line launcher that builds
// the server as DynamoDB Local's main does and sets its connectors' host
// before starting it.
const LoopbackHost = "127.0.0.1"

// dynamoDBLocalCommand: DynamoDB Local in memory on LoopbackHost:port, run
// in the directory holding DynamoDBLocal.jar and DynamoDBLocal_lib.
func dynamoDBLocalCommand(ctx context.Context, port int, o Options) (*exec.Cmd, func(), error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNoJava, err)
	}
	dir, err := dynamoDBLocalDir(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	launcher, cleanup, err := writeTempFile("idemkit-dynamodb-local-", "LoopbackDynamoDBLocal.class", loopbackLauncher)
	if err != nil {
		return nil, nil, err
	}
	// -XX:+UseSerialGC and -XX:TieredStopAtLevel=1: one GC thread and
	// the quick compiler only. Measured on two busy cores: ready in
	// 3.3 s on 1.3 s of CPU, against 6.0 s on 2.0 s of CPU without.
	cp := launcher + string(os.PathListSeparator) + "DynamoDBLocal.jar" + string(os.PathListSeparator) + filepath.Join("DynamoDBLocal_lib", "*")
	args := []string{"-Djava.library.path=DynamoDBLocal_lib", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-cp", cp, "LoopbackDynamoDBLocal", LoopbackHost, "-port", strconv.Itoa(port)}
	if o.DBPath != "" {
		args = append(args, "-dbPath", o.DBPath)
	} else {
		args = append(args, "-inMemory")
	}
	if o.SharedDB {
		args = append(args, "-sharedDb")
	}
	cmd := exec.Command(java, args...)
	cmd.Dir = dir
	return cmd, cleanup, nil
}
