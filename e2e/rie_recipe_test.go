package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/testutil"
)

// deployDoc returns docs/DEPLOYING.md.
func deployDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(shared.ModuleRoot(), "docs", "DEPLOYING.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// rieRecipe returns the deploy guide's RIE recipe: the one sh block that
// starts aws-lambda-rie.
func rieRecipe(t *testing.T) string {
	t.Helper()
	var found []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(deployDoc(t), -1) {
		if strings.Contains(m[1], "aws-lambda-rie --runtime-interface-emulator-address") {
			found = append(found, m[1])
		}
	}
	if len(found) != 1 {
		t.Fatalf("docs/DEPLOYING.md has %d sh blocks starting aws-lambda-rie, want 1", len(found))
	}
	return found[0]
}

// The deploy guide's "Run your function the Lambda way", followed as
// written: in a directory holding a user's handler (examples/orders) and
// the shipped sample events, with the environment the guide exports
// pointed at an emulator-backed table, the recipe block runs under bash
// with the pinned RIE on PATH. The HTTP API event answers 201 and then the
// same response replayed; the SQS batch delivered twice reports no
// failure and ships each message once. The guide installs the RIE the
// Makefile pins and names no fixed port.
func TestRIERecipeRunsAUserHandler(t *testing.T) {
	doc := deployDoc(t)
	if !strings.Contains(doc, "cmd/aws-lambda-rie@"+rieVersion+"\n") {
		t.Fatalf("docs/DEPLOYING.md does not install the pinned RIE %s", rieVersion)
	}
	recipe := rieRecipe(t)
	if regexp.MustCompile(`127\.0\.0\.1:[0-9]`).MatchString(recipe) || regexp.MustCompile(`localhost:[0-9]`).MatchString(doc) {
		t.Fatal("the RIE recipe names a fixed port")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		testutil.Unavailable(t, "the recipe needs curl: %v", err)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		testutil.Unavailable(t, "the recipe needs python3 to pick a free port: %v", err)
	}
	rie := rieBinary(t)
	e := dynamotest.Start(t, dynamotest.Moto)

	// The user's function directory: their handler and the sample events.
	// Inside the module (so `go build .` resolves idemkit), under a name
	// that ./... patterns skip.
	root := shared.ModuleRoot()
	dir, err := os.MkdirTemp(root, "_rie-recipe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	copyFile(t, filepath.Join(root, "examples", "orders", "main.go"), filepath.Join(dir, "main.go"))
	for _, ev := range []string{"apigw-v2-post.json", "sqs.json"} {
		copyFile(t, filepath.Join(root, "examples", "events", ev), filepath.Join(dir, "events", ev))
	}

	cmd := exec.Command("bash", "-c", recipe)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Dir(rie)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"DYNAMODB_ENDPOINT="+e.Endpoint, "IDEMPOTENCY_TABLE="+e.CreateTable(t, "IdempotencyTable"),
		"AWS_REGION="+e.Region, "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_EC2_METADATA_DISABLED=true")
	p := testutil.Start(t, cmd, 5*time.Second)
	select {
	case <-p.Done():
	case <-time.After(5 * time.Minute):
		t.Fatalf("the recipe did not finish:\n%s", p.Log.String())
	}
	out := p.Log.String()
	t.Logf("recipe output:\n%s", out)
	if code := p.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the recipe exited %d", code)
	}

	lines := strings.Split(strings.TrimSpace(out), "\n")
	var answers []map[string]any
	for _, l := range lines {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			answers = append(answers, m)
		}
	}
	if len(answers) != 4 {
		t.Fatalf("want 4 invocation answers (2 HTTP, 2 SQS), got %d", len(answers))
	}
	replay := func(m map[string]any) any {
		h, _ := m["headers"].(map[string]any)
		return h["Openwop-Idempotent-Replay"]
	}
	first, second := answers[0], answers[1]
	if first["statusCode"] != float64(201) || second["statusCode"] != float64(201) || first["body"] != second["body"] {
		t.Fatalf("HTTP answers: %v / %v", first, second)
	}
	if replay(first) != nil || replay(second) != "true" {
		t.Fatalf("replay markers: %v / %v", first["headers"], second["headers"])
	}
	for _, m := range answers[2:] {
		if f, _ := m["batchItemFailures"].([]any); len(f) != 0 || len(m) != 1 {
			t.Fatalf("SQS answer: %v", m)
		}
	}
	if last := lines[len(lines)-1]; last != "2" {
		t.Fatalf("the consumer shipped %s messages for a batch of 2 delivered twice, want 2", last)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
