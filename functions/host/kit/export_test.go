package kit

// CheckHomeCrossRegion is checkHomeCrossRegion, for the external tests.
var CheckHomeCrossRegion = checkHomeCrossRegion
