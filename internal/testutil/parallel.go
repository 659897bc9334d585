package testutil

import (
	"flag"
	"strconv"
)

// WaitingParallel raises how many parallel tests run at once (go test's
// -parallel, GOMAXPROCS by default) to at least n, unless -parallel was
// given on the command line. It is for a package whose parallel tests
// spend their time waiting (for a reply delayed on purpose, a timeout to
// pass) rather than computing: on two cores the default would run two of
// them at a time while the machine idles. Call it from TestMain before
// m.Run.
func WaitingParallel(n int) {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.parallel")
	if f == nil {
		return
	}
	given := false
	flag.Visit(func(v *flag.Flag) { given = given || v.Name == f.Name })
	if cur, err := strconv.Atoi(f.Value.String()); given || err != nil || cur >= n {
		return
	}
	_ = f.Value.Set(strconv.Itoa(n))
}
