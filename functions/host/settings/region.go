package settings

import (
	"regexp"
)

// regionRE is the shape of an AWS region name (eu-west-1, us-gov-west-1,
// ap-southeast-4, cn-north-1).
var regionRE = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$`)

// validRegion reports whether s looks like an AWS region name.
func validRegion(s string) bool { return regionRE.MatchString(s) }

// tableARNRE is the shape of a DynamoDB table's ARN (HOME_FENCE_TABLE_ARN):
// its region (1) and table name (2).
var tableARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:dynamodb:([a-z]{2}(?:-[a-z]+)+-[0-9]{1,2}):[0-9]{12}:table/([A-Za-z0-9_.-]{3,255})$`)
