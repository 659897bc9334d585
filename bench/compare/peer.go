package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// peer drives bench/powertools/runner.mjs: Powertools for AWS Lambda
// (TypeScript) makeIdempotent and a plain PutItem from the JavaScript SDK,
// measured inside the Node process.
type peer struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startPeer(dir string) (*peer, error) {
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@aws-lambda-powertools", "idempotency")); err != nil {
		return nil, fmt.Errorf("powertools is not installed in %s (run `npm ci --prefix %s`)", dir, dir)
	}
	cmd := exec.Command("node", "runner.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_NO_WARNINGS=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &peer{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}, nil
}

type peerAnswer struct {
	OK    bool      `json:"ok"`
	Error string    `json:"error"`
	US    []float64 `json:"us"`
	CPUUs float64   `json:"cpuUs"`
	// Outcome of a single request ("one", "release"): "ok" or the error's
	// name.
	Outcome string `json:"outcome"`
}

func (p *peer) call(cmd map[string]any) (peerAnswer, error) {
	b, _ := json.Marshal(cmd)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		return peerAnswer{}, err
	}
	line, err := p.out.ReadBytes('\n')
	if err != nil {
		return peerAnswer{}, fmt.Errorf("powertools runner: %w", err)
	}
	var a peerAnswer
	if err := json.Unmarshal(line, &a); err != nil {
		return a, fmt.Errorf("powertools runner: %w: %s", err, line)
	}
	if a.Error != "" {
		return a, errors.New("powertools runner: " + a.Error)
	}
	return a, nil
}

func (p *peer) init(endpoint, table, floorTable, body string) error {
	_, err := p.call(map[string]any{"op": "init", "endpoint": endpoint, "table": table, "floorTable": floorTable, "body": body})
	return err
}

// initCost points the runner at table, with the handler answering respBody.
func (p *peer) initCost(endpoint, table, floorTable, body, respBody string) error {
	_, err := p.call(map[string]any{"op": "init", "endpoint": endpoint, "table": table, "floorTable": floorTable, "body": body, "respBody": respBody})
	return err
}

// one sends one request with key and body and returns its outcome.
func (p *peer) one(key, body string) (string, error) {
	a, err := p.call(map[string]any{"op": "one", "key": key, "body": body})
	return a.Outcome, err
}

// hold starts a request with key and returns once it is inside the
// handler, where it waits for release.
func (p *peer) hold(key string) error {
	_, err := p.call(map[string]any{"op": "hold", "key": key})
	return err
}

// release lets the held request finish and returns its outcome.
func (p *peer) release() (string, error) {
	a, err := p.call(map[string]any{"op": "release"})
	return a.Outcome, err
}

// run runs n sequential requests of case c and returns their latencies (µs)
// and the Node process CPU time they took (µs).
func (p *peer) run(c string, n int, prefix string) ([]float64, float64, error) {
	a, err := p.call(map[string]any{"op": "run", "case": c, "n": n, "prefix": prefix})
	return a.US, a.CPUUs, err
}

func (p *peer) stop() {
	_, _ = p.in.Write([]byte(`{"op":"quit"}` + "\n"))
	_ = p.in.Close()
	_ = p.cmd.Wait()
}
