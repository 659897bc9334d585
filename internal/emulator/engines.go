package emulator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Engine names, the Name of each row of the engine table.
const (
	Moto          = "moto"
	Dynalite      = "dynalite"
	DynamoDBLocal = "dynamodb-local"
)

// Capabilities are what a DynamoDB engine implements and how it must be
// reached. Every consumer (internal/dynamotest, `idemkit dev`, the bench
// harness) reads them from the engine's row instead of comparing names.
// The values in the table were verified empirically; internal/dynamotest's
// TestCapabilities re-probes the first four on every run.
type Capabilities struct {
	// Streams: a table created with a StreamSpecification has a stream the
	// DynamoDB Streams API reads (DescribeStream, GetRecords). Without it
	// `idemkit dev` stores runs but cannot execute them.
	Streams bool
	// Transactions: TransactWriteItems / TransactGetItems.
	Transactions bool
	// TTL: UpdateTimeToLive / DescribeTimeToLive are accepted.
	TTL bool
	// ReturnsOldOnConditionFailure: a failed conditional write with
	// ReturnValuesOnConditionCheckFailure=ALL_OLD returns the existing item
	// in the ConditionalCheckFailedException.
	ReturnsOldOnConditionFailure bool
	// DeletesExpired: the engine deletes items whose TTL attribute lies in
	// the past, as DynamoDB does.
	DeletesExpired bool
	// Serialize: the engine's conditional writes are not atomic under
	// concurrency, so it is reached only through the in-process proxy that
	// forwards one request at a time (see the package doc). Server.Endpoint
	// is that proxy.
	Serialize bool
}

// Engine is one row of the engine table: everything idemkit knows about a
// DynamoDB engine it can start. A new engine is one new row in engines plus
// a test (see CONTRIBUTING.md).
type Engine struct {
	// Name is the kind Start and `idemkit dev --emulator` accept.
	Name string
	// Label is how messages name the engine ("DynamoDB Local").
	Label string
	// Note is the parenthesised remark flag help adds after Name ("AWS's
	// DynamoDB Local; needs java"), or "".
	Note string
	// Caps are its capabilities.
	Caps Capabilities
	// command returns the command line that serves on 127.0.0.1:port, and
	// a function removing anything it prepared (nil if none).
	command func(ctx context.Context, port int, o Options) (*exec.Cmd, func(), error)
}

// engines is the engine table, in the order tests run them.
var engines = []Engine{
	{
		Name: DynamoDBLocal, Label: "DynamoDB Local", Note: "AWS's DynamoDB Local; needs java",
		Caps:    Capabilities{Streams: true, Transactions: true, TTL: true, DeletesExpired: true},
		command: dynamoDBLocalCommand,
	},
	{
		Name: Moto, Label: "moto", Note: "moto_server on PATH",
		Caps:    Capabilities{Streams: true, Transactions: true, TTL: true, ReturnsOldOnConditionFailure: true, Serialize: true},
		command: motoCommand,
	},
	{
		Name: Dynalite, Label: "dynalite",
		Caps:    Capabilities{},
		command: dynaliteCommand,
	},
}

// Kinds are the engine names Start accepts, in the order tests run them
// (the Name of every row of the engine table).
var Kinds = func() []string {
	ks := make([]string, len(engines))
	for i, e := range engines {
		ks[i] = e.Name
	}
	return ks
}()

// ErrUnknownEngine is returned (wrapped) for an engine name that is not in
// the engine table.
var ErrUnknownEngine = errors.New("unknown emulator kind")

// Engines returns a copy of the engine table.
func Engines() []Engine { return append([]Engine(nil), engines...) }

// Lookup returns the row of the engine named name, or an error matching
// ErrUnknownEngine that lists the known names.
func Lookup(name string) (Engine, error) {
	for _, e := range engines {
		if e.Name == name {
			return e, nil
		}
	}
	return Engine{}, fmt.Errorf("%w %q (want %s)", ErrUnknownEngine, name, KindList(", ", " or "))
}

// KindList joins the engine names with sep, the last two with last
// ("dynamodb-local, moto or dynalite"; with "|" twice, "a|b|c").
func KindList(sep, last string) string {
	if len(Kinds) < 2 {
		return strings.Join(Kinds, sep)
	}
	return strings.Join(Kinds[:len(Kinds)-1], sep) + last + Kinds[len(Kinds)-1]
}

// FlagHelp describes the engines for a flag's help text: each name with its
// Note and, for an engine without streams, what `idemkit dev` cannot do on
// it: "dynamodb-local (AWS's DynamoDB Local; needs java), moto (...) or
// dynalite (no streams: dev runs what it writes; no audit)".
func FlagHelp() string {
	parts := make([]string, len(engines))
	for i, e := range engines {
		var notes []string
		if e.Note != "" {
			notes = append(notes, e.Note)
		}
		if !e.Caps.Streams {
			notes = append(notes, "no streams: dev runs what it writes; no audit")
		}
		parts[i] = e.Name
		if len(notes) > 0 {
			parts[i] += " (" + strings.Join(notes, "; ") + ")"
		}
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// EnvMotoServer names the moto_server executable to start instead of the
// one on PATH. `make test` sets it to the executable a version manager's
// shim on PATH stands for (pyenv which moto_server), which saves the
// shim's own start, about 0.6 s of CPU, on every moto an engine-backed
// test process starts.
const EnvMotoServer = "IDEMKIT_MOTO_SERVER"

// motoCommand: `moto_server -H 127.0.0.1 -p PORT`, from EnvMotoServer
// when it is set, else from PATH.
func motoCommand(_ context.Context, port int, _ Options) (*exec.Cmd, func(), error) {
	bin := os.Getenv(EnvMotoServer)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("moto_server"); err != nil {
			return nil, nil, fmt.Errorf("moto_server is not on PATH (pip install 'moto[server]'): %w", err)
		}
	}
	return exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port)), nil, nil
}

// dynaliteCommand: the pinned dynalite of Options.ToolsDir, in memory,
// with table status changes immediate, run by node with the hang-up
// guard preloaded (dynaliteHangUpGuard).
func dynaliteCommand(ctx context.Context, port int, o Options) (*exec.Cmd, func(), error) {
	bin, err := dynaliteBin(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, nil, fmt.Errorf("node is not on PATH (dynalite needs Node.js): %w", err)
	}
	guard, cleanup, err := writeDynaliteGuard()
	if err != nil {
		return nil, nil, err
	}
	return exec.Command(node, "--require", guard, bin, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"), cleanup, nil
}
