package settings

import (
	"regexp"
)

// regionRE is the shape of an AWS region name (eu-west-1, us-gov-west-1,
// ap-southeast-4, cn-north-1).
var regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)

// validRegion reports whether s looks like an AWS region name.
func validRegion(s string) bool { return regionRE.MatchString(s) }
