package rawconn

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
)

// MaxHeadBytes bounds one request's header block as kept (request line,
// header lines, line ends): a longer block is not tracked (ErrUntracked).
const MaxHeadBytes = 64 << 10

// netHTTPHeaderSlack is what net/http reads of a header block beyond
// http.Server.MaxHeaderBytes before it answers 431.
const netHTTPHeaderSlack = 4096

// MaxQueuedBytes bounds the header blocks a connection holds for requests
// not yet served (net/http reads ahead at most its buffer of the next
// request): more is not tracked (ErrUntracked).
const MaxQueuedBytes = 64 << 10

// maxChunkLine is net/http's bound on a chunk-size line (its
// maxLineLength), maxTrailerBytes its bound on the trailer section (its
// read buffer).
const (
	maxChunkLine    = 4096
	maxTrailerBytes = 4096
)

// errFraming is why the tracker stopped: the bytes are not a request it
// can delimit exactly as net/http does.
var errFraming = errors.New("rawconn: request framing not tracked")

type trackState int

const (
	stHead      trackState = iota // in a header block (or the empty lines before one)
	stBody                        // in a Content-Length body: remain bytes left
	stChunkLine                   // in a chunk-size line
	stChunkData                   // in a chunk's data: remain bytes left
	stChunkCR                     // expecting the CR after a chunk's data
	stChunkLF                     // expecting the LF after a chunk's data
	stTrailer                     // in the trailer section of a chunked body
	stLost                        // framing lost: nothing more is tracked
)

// tracker follows the HTTP/1.1 requests of one connection in the bytes
// read from it, in order: each header block (from the request line to the
// empty line ending it) is queued as a Head, and each body is skipped by
// its framing — Content-Length, or chunked (size lines with extensions,
// data, trailers) — as net/http frames it, so that what looks like a
// request inside a body is never taken for one. Empty lines before a
// request line are skipped (RFC 9112 section 2.2). When the bytes cannot be
// framed (malformed, over a bound) it stops for good: the heads queued
// before stay served, every later request is untracked.
//
// Memory is bounded: the header block being read (MaxHeadBytes), the line
// being read and the queue (MaxQueuedBytes); body bytes are only counted.
type tracker struct {
	state  trackState
	buf    []byte // the header block, chunk line or trailer line being read
	line   int    // where the current line of buf starts (stHead)
	remain uint64 // body or chunk data bytes left
	excess int64  // chunk overhead beyond data, as net/http bounds it
	trail  int    // trailer bytes read
	queue  []*Head
	queued int // bytes of the heads in queue
	// longLine: the framing was lost because a request line alone went
	// over MaxHeadBytes.
	longLine bool
}

// inRequestLine reports whether the bytes read so far end inside a
// request line (no line end yet) or the framing was lost on a request
// line over MaxHeadBytes: what a refusal of the head being read is about.
func (t *tracker) inRequestLine() bool {
	return t.longLine || t.state == stHead && t.line == 0 && len(t.buf) > 0
}

// feed tracks p, the next bytes read from the connection.
func (t *tracker) feed(p []byte) {
	for len(p) > 0 {
		switch t.state {
		case stLost:
			return
		case stBody, stChunkData:
			n := uint64(len(p))
			if n > t.remain {
				n = t.remain
			}
			p = p[n:]
			t.remain -= n
			if t.remain == 0 {
				if t.state == stBody {
					t.state = stHead
				} else {
					t.state = stChunkCR
				}
			}
		case stChunkCR, stChunkLF:
			want := byte('\r')
			if t.state == stChunkLF {
				want = '\n'
			}
			if p[0] != want {
				t.lose()
				return
			}
			p = p[1:]
			if t.state == stChunkCR {
				t.state = stChunkLF
			} else {
				t.state = stChunkLine
			}
		default:
			// stHead, stChunkLine, stTrailer: byte by byte up to a line end.
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				t.take(p)
				return
			}
			if !t.take(p[:i+1]) {
				return
			}
			p = p[i+1:]
			t.lineEnd()
		}
	}
}

// take appends b (no line end, or ending in one) to the current line,
// within the bounds; false when over a bound (framing lost).
func (t *tracker) take(b []byte) bool {
	switch t.state {
	case stHead:
		if len(t.buf) == 0 {
			// Empty lines before the request line are not part of it.
			b = bytes.TrimLeft(b, "\r\n")
		}
		if len(t.buf)+len(b) > MaxHeadBytes {
			long := t.line == 0
			t.lose()
			t.longLine = long
			return false
		}
	case stChunkLine:
		if len(t.buf)+len(b) > maxChunkLine+2 {
			t.lose()
			return false
		}
	case stTrailer:
		if t.trail += len(b); t.trail > maxTrailerBytes {
			t.lose()
			return false
		}
	}
	t.buf = append(t.buf, b...)
	return true
}

// lineEnd handles the line that buf now ends (with its LF).
func (t *tracker) lineEnd() {
	switch t.state {
	case stHead:
		if len(t.buf) == 0 {
			return // only empty lines so far
		}
		line := bytes.TrimSuffix(t.buf[t.line:len(t.buf)-1], []byte("\r"))
		if len(line) > 0 {
			t.line = len(t.buf)
			return
		}
		h, err := parseHead(t.buf[:t.line])
		if err != nil || t.queued+h.size > MaxQueuedBytes {
			t.lose()
			return
		}
		t.queue = append(t.queue, h)
		t.queued += h.size
		t.buf, t.line = t.buf[:0], 0
		switch {
		case h.chunked:
			t.state, t.excess = stChunkLine, 0
		case h.contentLength > 0:
			t.state, t.remain = stBody, uint64(h.contentLength)
		}
	case stChunkLine:
		n, err := t.chunkSize(t.buf)
		t.buf = t.buf[:0]
		switch {
		case err != nil:
			t.lose()
		case n == 0:
			t.state, t.trail = stTrailer, 0
		default:
			t.state, t.remain = stChunkData, n
		}
	case stTrailer:
		empty := len(bytes.TrimSuffix(t.buf[:len(t.buf)-1], []byte("\r"))) == 0
		t.buf = t.buf[:0]
		if empty {
			t.state = stHead
		}
	}
}

// chunkSize parses a chunk-size line (with its CRLF) as net/http does:
// CRLF-terminated with no other CR, under maxChunkLine, trailing
// whitespace and any extension (from ';') ignored, 1..16 hex digits; its
// overhead beyond the data it announces bounded as net/http bounds it.
func (t *tracker) chunkSize(line []byte) (uint64, error) {
	if len(line) < 2 || bytes.IndexByte(line, '\r') != len(line)-2 {
		return 0, errFraming
	}
	line = line[:len(line)-2]
	if len(line) >= maxChunkLine {
		return 0, errFraming
	}
	t.excess += int64(len(line)) + 2
	line = bytes.TrimRight(line, " \t")
	line, _, _ = bytes.Cut(line, []byte(";"))
	if len(line) == 0 || len(line) > 16 {
		return 0, errFraming
	}
	var n uint64
	for _, b := range line {
		switch {
		case '0' <= b && b <= '9':
			b -= '0'
		case 'a' <= b && b <= 'f':
			b -= 'a' - 10
		case 'A' <= b && b <= 'F':
			b -= 'A' - 10
		default:
			return 0, errFraming
		}
		n = n<<4 | uint64(b)
	}
	t.excess -= 16 + 2*int64(min(n, 1<<40))
	t.excess = max(t.excess, 0)
	if t.excess > 16<<10 {
		return 0, errFraming
	}
	return n, nil
}

// lose stops the tracking for good.
func (t *tracker) lose() {
	t.state, t.buf, t.line = stLost, nil, 0
}

// next removes and returns the oldest queued head; ok is false when none is
// queued.
func (t *tracker) next() (h *Head, ok bool) {
	if len(t.queue) == 0 {
		return nil, false
	}
	h = t.queue[0]
	t.queue[0] = nil
	t.queue = t.queue[1:]
	t.queued -= h.size
	return h, true
}

// parseHead parses a header block (request line, header lines, each ending
// in LF with an optional CR before it, without the empty line ending the
// block) and its body framing as net/http does: Transfer-Encoding (HTTP/1.1
// and later only) exactly one "chunked"; Content-Length values all equal,
// decimal; a chunked body wins over a Content-Length; neither: no body.
func parseHead(block []byte) (*Head, error) {
	h := &Head{size: len(block)}
	lines := bytes.Split(bytes.TrimSuffix(block, []byte("\n")), []byte("\n"))
	for i := range lines {
		lines[i] = bytes.TrimSuffix(lines[i], []byte("\r"))
	}
	method, rest, ok1 := bytes.Cut(lines[0], []byte(" "))
	target, proto, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 {
		return nil, errFraming
	}
	h.Method, h.Target, h.Proto = string(method), string(target), string(proto)
	major, minor, ok := http.ParseHTTPVersion(h.Proto)
	if !ok || major != 1 {
		return nil, errFraming
	}
	for _, l := range lines[1:] {
		if len(l) > 0 && (l[0] == ' ' || l[0] == '\t') {
			if len(h.fields) == 0 {
				return nil, errFraming // a folded first line: net/http refuses it
			}
			h.fields[len(h.fields)-1].folded = true
			continue
		}
		name, value, found := bytes.Cut(l, []byte(":"))
		if !found || !validName(name) {
			return nil, errFraming
		}
		h.fields = append(h.fields, field{name: string(name), value: string(value)})
	}
	var te, cl []string
	for _, f := range h.fields {
		switch {
		case asciiEqualFold(f.name, "Transfer-Encoding"):
			if f.folded {
				return nil, errFraming
			}
			te = append(te, f.value)
		case asciiEqualFold(f.name, "Content-Length"):
			if f.folded {
				return nil, errFraming
			}
			cl = append(cl, trimOWS(f.value))
		}
	}
	if len(cl) > 0 {
		for _, v := range cl[1:] {
			if v != cl[0] {
				return nil, errFraming
			}
		}
		n, err := strconv.ParseUint(cl[0], 10, 63)
		if err != nil {
			return nil, errFraming
		}
		h.contentLength = int64(n)
	}
	if len(te) > 0 && (major > 1 || minor >= 1) {
		if len(te) != 1 || !asciiEqualFold(trimOWS(te[0]), "chunked") {
			return nil, errFraming
		}
		h.chunked, h.contentLength = true, -1
	}
	return h, nil
}

// validName reports whether b is a header field name (an RFC 9110 token).
func validName(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0:
		default:
			return false
		}
	}
	return true
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
