package ledger

// Project is project with the record filter on and the default attempt cap:
// the pure projection the tests check Witness's row order against.
func Project(runID string, recs []*Record) Projection {
	return project(runID, recs, true, DefaultMaxAttempts)
}
