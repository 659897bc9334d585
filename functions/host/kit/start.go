package kit

import (
	"context"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/boot"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/emf"
)

// Start is a function's start-up as its main holds it: its name, the
// functions' logger and the process environment (Begin), and, after Boot,
// the settings, the DynamoDB client and the EMF recorder. A main wires its
// handler from it, with Must ending the process on a wiring error, marks
// Wired and hands the handler to the Lambda runtime.
type Start struct {
	// Name is the function's name: every start-up failure is logged under
	// it ("api: wiring").
	Name string
	// Logger is the functions' logger (boot.Logger: JSON lines on stderr
	// carrying the invocation's Lambda request id).
	Logger *slog.Logger
	// Getenv reads the process environment: the one getenv a main gives
	// the code it wires.
	Getenv func(string) string
	// Env is the settings read from the environment (settings.LoadEnv).
	// Set by Boot; zero after Begin.
	Env settings.Env
	// Client is the DynamoDB client of the default AWS configuration, at
	// DYNAMODB_ENDPOINT when set (NewDynamoClient). Set by Boot; nil after
	// Begin.
	Client *dynamodb.Client
	// Metrics is the EMF recorder on stdout in the METRICS_NAMESPACE
	// namespace. Set by Boot; nil after Begin.
	Metrics *emf.Recorder
}

// Begin starts the start-up of the function name: it marks the init
// trace's "main" phase and returns the Start holding the functions' logger
// and the process environment, for a function that reads its few variables
// itself (the auditor). Boot is Begin followed by the settings and the
// DynamoDB client.
func Begin(name string) *Start {
	boot.Trace("main")
	return &Start{Name: name, Logger: boot.Logger(), Getenv: boot.Getenv}
}

// Boot is the start-up of the function name: Begin, then the settings
// (settings.LoadEnv, then the required variables), the DynamoDB client and
// an EMF recorder on stdout (namespace METRICS_NAMESPACE), and in a
// replica-region stack the home stack's CrossRegion, checked against this
// one's (HOME_FENCE_TABLE_ARN; checkHomeCrossRegion). It never
// returns on failure: the error is logged under the function's name and
// the process exits 1, which Lambda reports as an init error.
func Boot(name string, required ...string) *Start {
	s := Begin(name)
	env, err := settings.LoadEnv(s.Getenv)
	if err == nil && len(required) > 0 {
		err = env.Require(required...)
	}
	s.Must("configuration", err)
	s.Metrics = emf.New(os.Stdout, env.MetricsNamespace)
	s.Warn(env.Warnings)
	boot.Trace("settings")
	client, err := NewDynamoClient(context.Background(), env.DynamoDBEndpoint)
	s.Must("aws", err)
	// A replica-region stack under another CrossRegion than the home
	// stack's stops here (RED_TEAM 537).
	warnings, err := homeCrossRegion(client, env)
	s.Must("cross-region", err)
	s.Warn(warnings)
	s.Env, s.Client = env, client
	return s
}

// MetricConfigurationWarnings counts the settings' warnings a function
// logged at a cold start (Start.Warn; one per warning, no dimensions): a
// value that does not do what it says but must not stop the function,
// such as a WEBHOOK_ALLOWLIST entry that is no host. The
// configuration-warnings alarm watches it, so an operator learns of it
// without reading the log (RED_TEAM 381).
const MetricConfigurationWarnings = "idemkit.configuration.warnings_total"

// Warn logs each of the settings' warnings (settings.Env.Warnings) under
// the function's name, at every cold start: a value that does not do what
// it says but must not stop the function (a stack upgraded with it kept
// serving before; RED_TEAM 374). It counts them in
// MetricConfigurationWarnings on s.Metrics (nil counts nothing), and
// writes nothing without a warning.
func (s *Start) Warn(warnings []string) {
	for _, w := range warnings {
		s.Logger.Warn(s.Name+": configuration", slog.String("warning", w))
	}
	if len(warnings) > 0 {
		s.Metrics.Count(MetricConfigurationWarnings, float64(len(warnings)), nil)
	}
}

// Must ends the process with err logged under the function's name and
// stage (what failed) when err is not nil, which Lambda reports as an init
// error (boot.Must).
func (s *Start) Must(stage string, err error) { boot.Must(s.Logger, s.Name, stage, err) }

// Kit is NewKit over what Boot read, with the parts p selects; a wiring
// error ends the process (stage "wiring").
func (s *Start) Kit(p Parts) *Kit {
	k, err := NewKit(Config{Env: s.Env, Client: s.Client, Parts: p, Logger: s.Logger, Metrics: s.Metrics})
	s.Must("wiring", err)
	return k
}

// Wired marks the end of the wiring in the init trace ("wiring"): the main
// calls it just before it hands its handler to the Lambda runtime.
func (s *Start) Wired() { boot.Trace("wiring") }
