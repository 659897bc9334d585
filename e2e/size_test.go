package e2e

import (
	"os"
	"testing"
)

// BenchmarkLambdaBinarySizes reports the size of each function's bootstrap
// as SAM builds it for provided.al2023 (linux/arm64, -trimpath,
// -ldflags='-s -w', CGO_ENABLED=0). Sizes do not depend on b.N.
func BenchmarkLambdaBinarySizes(b *testing.B) {
	dir := b.TempDir()
	for _, fn := range []string{"api", "authorizer", "executor", "auditor", "sweeper"} {
		p := build(b, dir, fn, "functions/"+fn, "linux", "arm64")
		st, err := os.Stat(p)
		must(b, err)
		b.ReportMetric(float64(st.Size())/(1<<20), fn+"-MiB")
	}
	for i := 0; i < b.N; i++ {
	}
}

// TestLambdaBinariesBuild builds every function for SAM's target
// (linux/arm64) with the release flags.
func TestLambdaBinariesBuild(t *testing.T) {
	dir := t.TempDir()
	for _, fn := range []string{"api", "authorizer", "executor", "auditor", "sweeper"} {
		build(t, dir, fn, "functions/"+fn, "linux", "arm64")
	}
}
