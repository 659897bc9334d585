package idem

// RegisterPreset adds p to the preset registry for one test, as a new
// preset file's registry row would; the returned func removes it.
func RegisterPreset(p Policy) (restore func()) {
	saved := presets
	presets = append(presets[:len(presets):len(presets)], p)
	return func() { presets = saved }
}

// The digest and key parsers, for the package's tests and benchmarks.
var (
	DigestBytes = digestBytes
	DigestJSON  = digestJSON
	ParseKey    = parseKey
)
