package kit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/settings"
)

// fakeTags answers ListTagsOfResource with its pages in turn, or err.
type fakeTags struct {
	pages [][]types.Tag
	err   error
	arns  []string
}

func (f *fakeTags) ListTagsOfResource(_ context.Context, in *dynamodb.ListTagsOfResourceInput, _ ...func(*dynamodb.Options)) (*dynamodb.ListTagsOfResourceOutput, error) {
	f.arns = append(f.arns, aws.ToString(in.ResourceArn))
	if f.err != nil {
		return nil, f.err
	}
	i := 0
	if in.NextToken != nil {
		i = len(aws.ToString(in.NextToken))
	}
	out := &dynamodb.ListTagsOfResourceOutput{Tags: f.pages[i]}
	if i+1 < len(f.pages) {
		out.NextToken = aws.String(strings.Repeat("x", i+1))
	}
	return out, nil
}

func tag(k, v string) types.Tag { return types.Tag{Key: aws.String(k), Value: aws.String(v)} }

const homeFenceARN = "arn:aws:dynamodb:eu-west-1:123456789012:table/home-FenceTable-1"

func replicaEnv(crossRegion string) settings.Env {
	return settings.Env{CrossRegion: crossRegion, FenceTable: "home-FenceTable-1", FenceTableRegion: "eu-west-1", HomeFenceTableARN: homeFenceARN}
}

// A replica-region stack deployed with another CrossRegion than the home
// stack's stops at start-up: the home stack tags its fence table with its
// CrossRegion, and the replica's api and executor read the tag (RED_TEAM
// 537). Before, nothing compared them: a reconciled-records replica under a
// fenced-effects home decided its keys on its own replica and fired its
// effects without the fence.
func TestReplicaRefusesAnotherCrossRegionThanTheHomes(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, replica string
		tags          fakeTags
		wantErr       bool
		wantWarning   string
	}{
		{name: "same", replica: settings.CrossRegionFenced, tags: fakeTags{pages: [][]types.Tag{{tag("team", "x"), tag(TagCrossRegion, settings.CrossRegionFenced)}}}},
		{name: "reconciled under fenced", replica: settings.CrossRegionReconciled, tags: fakeTags{pages: [][]types.Tag{{tag(TagCrossRegion, settings.CrossRegionFenced)}}}, wantErr: true},
		{name: "fenced under reconciled", replica: settings.CrossRegionFenced, tags: fakeTags{pages: [][]types.Tag{{tag(TagCrossRegion, settings.CrossRegionReconciled)}}}, wantErr: true},
		{name: "tag on a later page", replica: settings.CrossRegionReconciled, tags: fakeTags{pages: [][]types.Tag{{tag("a", "b")}, {tag(TagCrossRegion, settings.CrossRegionFenced)}}}, wantErr: true},
		{name: "home stack without the tag", replica: settings.CrossRegionFenced, tags: fakeTags{pages: [][]types.Tag{{tag("a", "b")}}}, wantWarning: "carries no " + TagCrossRegion},
		{name: "home unreachable", replica: settings.CrossRegionFenced, tags: fakeTags{err: errors.New("throttled")}, wantWarning: "throttled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			warnings, err := checkHomeCrossRegion(ctx, &c.tags, replicaEnv(c.replica))
			if c.wantErr {
				if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), settings.CrossRegionFenced) || !strings.Contains(err.Error(), settings.CrossRegionReconciled) {
					t.Fatalf("err = %v, want ErrConfig naming both postures", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			switch {
			case c.wantWarning == "" && len(warnings) > 0:
				t.Errorf("warnings %q, want none", warnings)
			case c.wantWarning != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], c.wantWarning)):
				t.Errorf("warnings %q, want one containing %q", warnings, c.wantWarning)
			}
			for _, a := range c.tags.arns {
				if a != homeFenceARN {
					t.Errorf("listed the tags of %q, want %q", a, homeFenceARN)
				}
			}
			if len(c.tags.arns) == 0 {
				t.Error("the home fence table's tags were never read")
			}
		})
	}
}

// A stack without HOME_FENCE_TABLE_ARN (a home-region stack, `idemkit
// dev`) reads nothing at start-up.
func TestHomeStackReadsNoTag(t *testing.T) {
	f := &fakeTags{err: errors.New("must not be called")}
	env := replicaEnv(settings.CrossRegionFenced)
	env.HomeFenceTableARN = ""
	warnings, err := checkHomeCrossRegion(context.Background(), f, env)
	if err != nil || len(warnings) > 0 || len(f.arns) > 0 {
		t.Fatalf("warnings %q, err %v, calls %q: want none", warnings, err, f.arns)
	}
}
