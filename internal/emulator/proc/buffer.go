package proc

import "sync"

// Buffer is a goroutine-safe io.Writer for a process's output. With Max > 0
// it keeps only the last Max bytes written (enough for an error message);
// with Max == 0 it keeps everything. The zero value is ready to use.
type Buffer struct {
	// Max bounds the bytes kept (the most recent ones); 0 keeps all.
	Max int

	mu  sync.Mutex
	buf []byte
}

// Write appends b, dropping the oldest bytes beyond Max. It never fails.
func (t *Buffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.Max; t.Max > 0 && over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

// String returns the bytes kept.
func (t *Buffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
