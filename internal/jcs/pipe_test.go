package jcs

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// withProcs runs f with GOMAXPROCS set to n.
func withProcs(t *testing.T, n int, f func()) {
	t.Helper()
	old := runtime.GOMAXPROCS(n)
	defer runtime.GOMAXPROCS(old)
	f()
}

// canonicalRows returns rowsBody(size) in canonical form: a top-level
// object whose one member holds an array of rows, taken in place.
func canonicalRows(t *testing.T, size int) []byte {
	t.Helper()
	b, err := Canonicalize(rowsBody(size))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pipeCases returns inputs around the size from which the digest hashes
// beside the parse: canonical text taken in place (which starts a
// hasher above that size), text the parse writes (which does not), and
// a top-level object found out of order after its text was hashed.
func pipeCases(t *testing.T) []struct {
	name string
	in   []byte
	pipe bool
} {
	t.Helper()
	rows := canonicalRows(t, 4*pipeMin)
	inner := rows[len(`{"rows":`) : len(rows)-1] // a canonical array
	below, above := inner[:0:0], inner[:0:0]
	for _, n := range []int{pipeMin - 1024, pipeMin + 1024} {
		k := bytes.Index(inner[n:], []byte("},{")) + n + 1 // cut after a whole row
		arr := append(append([]byte(nil), inner[:k]...), ']')
		if n < pipeMin {
			below = arr
		} else {
			above = arr
		}
	}
	rb := rowsBody(pipeMin)
	written := rb[len(`{"rows":[`) : len(rb)-2] // rows the parse rewrites
	for _, in := range [][]byte{below, above} {
		if _, err := Canonicalize(in); err != nil {
			t.Fatal(err)
		}
	}
	late := append(append([]byte(`{"rows":`), inner...), `,"a":1}`...)
	lateDup := append(append([]byte(`{"a":`), inner...), `,"b":1,"a":2}`...)
	return []struct {
		name string
		in   []byte
		pipe bool
	}{
		{"array below", below, false},
		{"array above", above, true},
		{"object below", append(append([]byte(`{"rows":`), below...), '}'), false},
		{"object above", append(append([]byte(`{"rows":`), above...), '}'), true},
		{"object 4x", rows, true},
		{"object out of order late", late, true},
		{"duplicate late", lateDup, true},
		{"written text", rowsBody(4 * pipeMin), false},
		{"in place, then written", append(append(append(append([]byte(`{"rows":`), above[:len(above)-1]...), ','), written...), "]}"...), true},
		{"in place, then written, array", append(append(append(append([]byte(nil), above[:len(above)-1]...), ','), written...), ']'), true},
		{"indented", testBody(4 * pipeMin), false},
		{"array of unsorted", []byte("[" + strings.TrimSuffix(strings.Repeat(`{"b":1,"a":"x"},`, pipeMin/8), ",") + "]"), false},
		{"syntax error late", append(append([]byte(nil), above[:len(above)-1]...), ",]"...), true},
		{"invalid UTF-8 late", append(append([]byte(nil), above[:len(above)-1]...), ",\"\xff\"]"...), true},
		{"exact number late", append(append([]byte(nil), above[:len(above)-1]...), ",1.00000000000000000001]"...), true},
		{"end of input late", above[:len(above)-1], true},
	}
}

// TestSum256Pipe: above the size from which the digest hashes beside the
// parse, on both sides of it, and with one processor or two, every
// digest is the SHA-256 of Canonicalize's output (which never hashes),
// every error is Canonicalize's (same offset), and canonical is reported
// for canonical input; a hasher starts only above that size, with two
// processors, for text found in place.
func TestSum256Pipe(t *testing.T) {
	for _, tc := range pipeCases(t) {
		form, werr := CanonicalizeExact(tc.in)
		for _, procs := range []int{1, 2} {
			withProcs(t, procs, func() {
				before := pipesStarted.Load()
				sum, canonical, err := Sum256ExactCanonical(tc.in)
				started := pipesStarted.Load() - before
				if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
					t.Fatalf("%s, %d procs: error %v, want %v", tc.name, procs, err, werr)
				}
				var se *SyntaxError
				var e *Error
				if err != nil && !errors.As(err, &se) && !errors.As(err, &e) {
					t.Fatalf("%s: error %T is not typed", tc.name, err)
				}
				if err == nil {
					if sum != sha256.Sum256(form) {
						t.Fatalf("%s, %d procs: digest differs from the SHA-256 of the canonical form", tc.name, procs)
					}
					if want := bytes.Equal(form, tc.in); canonical != want {
						t.Fatalf("%s, %d procs: canonical = %v, want %v", tc.name, procs, canonical, want)
					}
					if s2, err := Sum256Exact(tc.in); err != nil || s2 != sum {
						t.Fatalf("%s, %d procs: Sum256Exact differs: %v", tc.name, procs, err)
					}
				}
				if want := tc.pipe && procs >= 2; (started > 0) != want {
					// The tests of this package do not run in parallel,
					// so no other digest starts a hasher meanwhile.
					t.Fatalf("%s, %d procs: %d hashers started, want one: %v", tc.name, procs, started, want)
				}
			})
		}
		if got, err := Sum256(tc.in); err == nil {
			want, _ := Canonicalize(tc.in)
			if got != sha256.Sum256(want) {
				t.Fatalf("%s: Sum256 differs", tc.name)
			}
		}
	}
}

// TestSum256PipeGoroutinesEnd: a digest's hasher ends with it, whether
// the digest succeeds or fails part way, run after run: the number of
// goroutines comes back to what it was (waiting for the hashers to be
// scheduled, not for a time).
func TestSum256PipeGoroutinesEnd(t *testing.T) {
	withProcs(t, 2, func() {
		cases := pipeCases(t)
		base := runtime.NumGoroutine()
		before := pipesStarted.Load()
		for range 20 {
			for _, tc := range cases {
				_, _ = Sum256Exact(tc.in)
			}
		}
		if pipesStarted.Load() == before {
			t.Fatal("no hasher started")
		}
		n := runtime.NumGoroutine()
		for i := 0; i < 100000 && n > base; i++ {
			runtime.Gosched()
			n = runtime.NumGoroutine()
		}
		if n > base {
			t.Fatalf("%d goroutines after the digests, %d before", n, base)
		}
	})
}

// TestSum256PipeConcurrent: digests that hash beside their parse, many
// at once (run with -race), give the single-threaded digests.
func TestSum256PipeConcurrent(t *testing.T) {
	withProcs(t, 2, func() {
		cases := pipeCases(t)
		want := make([][sha256.Size]byte, len(cases))
		wantErr := make([]error, len(cases))
		withProcs(t, 1, func() {
			for i, tc := range cases {
				want[i], wantErr[i] = Sum256Exact(tc.in)
			}
		})
		done := make(chan string, 4)
		for g := range 4 {
			go func() {
				for n := range 3 * len(cases) {
					i := (g + n) % len(cases)
					sum, err := Sum256Exact(cases[i].in)
					if (err == nil) != (wantErr[i] == nil) || sum != want[i] {
						done <- cases[i].name
						return
					}
				}
				done <- ""
			}()
		}
		for range 4 {
			if name := <-done; name != "" {
				t.Errorf("%s: concurrent digest differs", name)
			}
		}
	})
}

// TestSum256PipeStopsBehindTheHasher: when the parse stops the hasher
// (its text is now written, not taken in place) while the hasher is still
// writing a piece and two more wait, it waits for that piece and hashes
// the two itself; when the parse fails, the digest ends all the same.
// The hasher is held in its first piece until the parse stops it, and
// the parse queues its second piece only once the hasher holds the first.
func TestSum256PipeStopsBehindTheHasher(t *testing.T) {
	canon := canonicalRows(t, pipeMin)
	inner := canon[len(`{"rows":`) : len(canon)-1]
	k := bytes.Index(inner[3*flushSize+flushSize/2:], []byte("},{")) + 3*flushSize + flushSize/2 + 1
	rb := rowsBody(pipeMin)
	written := rb[len(`{"rows":[`) : len(rb)-2]
	mixed := append(append(append(append([]byte(`{"rows":`), inner[:k]...), ','), written...), "]}"...)
	broken := append(append(append([]byte(`{"rows":`), inner[:k]...), ','), written[:len(written)/2]...)
	form, err := Canonicalize(mixed)
	if err != nil {
		t.Fatal(err)
	}
	withProcs(t, 2, func() {
		for _, in := range [][]byte{mixed, broken} {
			held, release := make(chan struct{}), make(chan struct{})
			first, pushes := true, 0
			pieceHook = func() {
				if first {
					first = false
					held <- struct{}{}
					<-release
				}
			}
			pushHook = func() {
				if pushes++; pushes == 2 {
					<-held // the hasher is writing the first piece
				}
			}
			stopHook = func() { close(release) }
			before := pipesStarted.Load()
			done := make(chan struct{})
			var sum [sha256.Size]byte
			var err error
			go func() {
				sum, err = Sum256Exact(in)
				close(done)
			}()
			<-done
			pieceHook, pushHook, stopHook = nil, nil, nil
			if pipesStarted.Load() == before {
				t.Fatal("no hasher started")
			}
			if len(in) == len(mixed) {
				if err != nil || sum != sha256.Sum256(form) {
					t.Fatalf("digest %x, %v; want the SHA-256 of the canonical form", sum, err)
				}
			} else if err == nil {
				t.Fatal("truncated input accepted")
			}
		}
	})
}
