package kit

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/functions/host/settings"
)

// TagCrossRegion is the tag the home-region stack puts on its FenceTable
// (template.yaml): its CrossRegion. A replica-region stack's api and
// executor read it at start-up (HOME_FENCE_TABLE_ARN) and stop under
// another posture (RED_TEAM 537).
const TagCrossRegion = "idemkit:cross-region"

// homeCheckTimeout bounds the start-up read of the home stack's tag, well
// inside Lambda's 10 s init phase: a home region out of reach then warns
// instead of failing the init.
const homeCheckTimeout = 3 * time.Second

// maxTagPages bounds the pages of tags read (a table holds at most 50
// tags; DynamoDB pages them at 10).
const maxTagPages = 10

// tagLister is the DynamoDB call checkHomeCrossRegion makes.
type tagLister interface {
	ListTagsOfResource(context.Context, *dynamodb.ListTagsOfResourceInput, ...func(*dynamodb.Options)) (*dynamodb.ListTagsOfResourceOutput, error)
}

// checkHomeCrossRegion compares a replica-region stack's CrossRegion with
// the home stack's, which the home stack's FenceTable carries in its
// TagCrossRegion tag (env.HomeFenceTableARN; nothing is read when it is
// unset). Another value than env.CrossRegion is an error matching
// ErrConfig: the replica would decide keys and fire effects under a
// posture the home does not hold (a reconciled-records replica of a
// fenced-effects home fires its effects without the fence, while the home
// advertises multiRegion). A tag missing (a home stack deployed from a
// template before the tag) or a read that fails (the home region out of
// reach, throttled) is a warning: the stack keeps serving, and the
// configuration-warnings alarm tells the operator. One call per cold
// start (ListTagsOfResource; DynamoDB allows 10 a second per account), in
// replica-region stacks only.
func checkHomeCrossRegion(ctx context.Context, c tagLister, env settings.Env) ([]string, error) {
	if env.HomeFenceTableARN == "" {
		return nil, nil
	}
	in := &dynamodb.ListTagsOfResourceInput{ResourceArn: aws.String(env.HomeFenceTableARN)}
	for range maxTagPages {
		out, err := c.ListTagsOfResource(ctx, in)
		if err != nil {
			return []string{fmt.Sprintf("%s: the home stack's CrossRegion (tag %s of %s) could not be read, so this stack's %s=%s is unchecked against it: %v",
				settings.EnvHomeFenceTableARN, TagCrossRegion, env.HomeFenceTableARN, settings.EnvCrossRegion, env.CrossRegion, err)}, nil
		}
		for _, tg := range out.Tags {
			if aws.ToString(tg.Key) != TagCrossRegion {
				continue
			}
			if home := aws.ToString(tg.Value); home != env.CrossRegion {
				return nil, configError(fmt.Errorf("%s=%s, but the home stack's CrossRegion is %s (tag %s of %s): deploy every region's stack with the home stack's CrossRegion, or this region decides keys and fires effects under a posture the home does not hold",
					settings.EnvCrossRegion, env.CrossRegion, home, TagCrossRegion, env.HomeFenceTableARN))
			}
			return nil, nil
		}
		if out.NextToken == nil {
			break
		}
		in.NextToken = out.NextToken
	}
	return []string{fmt.Sprintf("%s: the home stack's fence table %s carries no %s tag (a home stack deployed before it), so this stack's %s=%s is unchecked against the home's: update the home stack",
		settings.EnvHomeFenceTableARN, env.HomeFenceTableARN, TagCrossRegion, settings.EnvCrossRegion, env.CrossRegion)}, nil
}

// homeCrossRegion is checkHomeCrossRegion over client, calling the home
// region (FENCE_TABLE_REGION), within homeCheckTimeout.
func homeCrossRegion(client *dynamodb.Client, env settings.Env) ([]string, error) {
	if env.HomeFenceTableARN == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), homeCheckTimeout)
	defer cancel()
	return checkHomeCrossRegion(ctx, HomeClient(client, env.FenceTableRegion), env)
}
