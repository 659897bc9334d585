package idem

// Metrics receives a Guard's counters (see the Metric… names): one call per
// event, with bounded dimensions only (never keys, tenants or ids). The
// CloudWatch Embedded Metric Format recorder (*emf.Recorder, emf.New) is
// one; any type with this method is another. Implementations must be safe
// for concurrent use.
type Metrics interface {
	Count(name string, n float64, dims map[string]string)
}
