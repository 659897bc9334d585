package ledger

// Metrics receives a Ledger's counters: one call per event, with bounded
// dimensions only ("kind", "keying"; never keys, tenants or ids). The
// CloudWatch Embedded Metric Format recorder (*emf.Recorder) is one; any
// type with this method is another. Implementations must be safe for
// concurrent use.
type Metrics interface {
	Count(name string, n float64, dims map[string]string)
}
