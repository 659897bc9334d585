package regionsim_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/regionsim"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// coalescedPrefix names the runs of the multi-region tests under
// coalescing replication (TestCoalesced).
const coalescedPrefix = "TestCoalesced/"

// newReplicator is regionsim.New for the tests: under TestCoalesced the
// replicator coalesces (Config.Coalesce), so each test that runs there
// also holds when a region's writes to one item replicate as one change.
func newReplicator(t *testing.T, cfg regionsim.Config) (*regionsim.Replicator, error) {
	cfg.Coalesce = strings.HasPrefix(t.Name(), coalescedPrefix)
	rep, err := regionsim.New(cfg)
	if err == nil && cfg.Coalesce {
		t.Cleanup(func() { t.Logf("regionsim: %d replicated writes coalesced", rep.Coalesced()) })
	}
	return rep, err
}

// TestCoalesced runs the multi-region tests again with a replicator that
// replicates a region's writes to one item, due together, as one change
// (the last): a real global table may merge a claim and its end, and the
// other region's stream then carries only the final image. It runs every
// test that replicates through newReplicator; those that replicate
// nothing through it (docs/MULTI_REGION.md names them) are not here.
func TestCoalesced(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"TestAuditCountsAnEscapeInEveryRegion", TestAuditCountsAnEscapeInEveryRegion},
		{"TestLayer1PartitionConvergesOnLowestRunID", TestLayer1PartitionConvergesOnLowestRunID},
		{"TestLayer1ConflictIsRecordedOnce", TestLayer1ConflictIsRecordedOnce},
		{"TestLayer1ForgottenClaimDoesNotDeleteTheOtherRegionsRun", TestLayer1ForgottenClaimDoesNotDeleteTheOtherRegionsRun},
		{"TestLayer1AnswerNamingNoRunDoesNotReplaceTheOtherRegionsRun", TestLayer1AnswerNamingNoRunDoesNotReplaceTheOtherRegionsRun},
		{"TestLayer1PendingOverPendingCreatesOneRun", TestLayer1PendingOverPendingCreatesOneRun},
		{"TestLayer1RetryAndForkKeysConvergeOnLowestRunID", TestLayer1RetryAndForkKeysConvergeOnLowestRunID},
		{"TestLayer1RetryKeyAnswered404InOneRegionKeepsTheRun", TestLayer1RetryKeyAnswered404InOneRegionKeepsTheRun},
		{"TestLayer1StaleHoldAfterConvergenceRestoresNothing", TestLayer1StaleHoldAfterConvergenceRestoresNothing},
		{"TestLayer1TakeoverAcrossRegionsConvergesOnLowestRunID", TestLayer1TakeoverAcrossRegionsConvergesOnLowestRunID},
		{"TestLayer1HomePinnedTTLDeleteFromAReplica", TestLayer1HomePinnedTTLDeleteFromAReplica},
		{"TestLayer1ReconciledTTLDeleteFromTheOtherRegion", TestLayer1ReconciledTTLDeleteFromTheOtherRegion},
		{"TestPartitionReconciledRecords", TestPartitionReconciledRecords},
		{"TestPartitionFencedEffects", TestPartitionFencedEffects},
		{"TestPartitionRacingFencedExecutors", TestPartitionRacingFencedExecutors},
		{"TestFencedEffectsUnderClockSkew", TestFencedEffectsUnderClockSkew},
		{"TestLayer1HomePinnedReplayWithinLag", TestLayer1HomePinnedReplayWithinLag},
		{"TestLayer1HomePinnedPartitionFailsClosed", TestLayer1HomePinnedPartitionFailsClosed},
		{"TestLayer1ReplayIntoSecondRegion", TestLayer1ReplayIntoSecondRegion},
		{"TestLayer1ReplayWithinLagStartsNewWork", TestLayer1ReplayWithinLagStartsNewWork},
		{"TestReconciledReleaseOverACompletionIsWrittenBack", TestReconciledReleaseOverACompletionIsWrittenBack},
		{"TestEffectReconciledTTLDeleteFromTheOtherRegion", TestEffectReconciledTTLDeleteFromTheOtherRegion},
		{"TestThreeRegionsLayer1ConvergesOnLowestRunID", TestThreeRegionsLayer1ConvergesOnLowestRunID},
		{"TestThreeRegionsLayer1ReconciledTTLDeleteWhileOneIsCutOff", TestThreeRegionsLayer1ReconciledTTLDeleteWhileOneIsCutOff},
		{"TestThreeRegionsFencedEffects", TestThreeRegionsFencedEffects},
		{"TestThreeRegionsFencedRacingExecutors", TestThreeRegionsFencedRacingExecutors},
		{"TestThreeRegionsReleasesOverACompletionAreWrittenBack", TestThreeRegionsReleasesOverACompletionAreWrittenBack},
		{"TestThreeRegionsPartitionReconciledRecords", TestThreeRegionsPartitionReconciledRecords},
	} {
		t.Run(tc.name, tc.f)
	}
}

// With Coalesce, a region's writes to one item due together replicate as
// one change: the other region's stream carries one MODIFY from what it
// held to the last image (a claim and its end merged), none of the writes
// between; writes to other items, or not yet due, are not merged.
func TestReplicatorCoalesces(t *testing.T) {
	p := newPair(t, "EffectsTable")
	clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
	var seen []regionsim.Change
	rep, err := regionsim.New(regionsim.Config{A: p.region(eu), B: p.region(us), KeyAttrs: []string{"pk", "sk"},
		Lag: time.Second, Now: clock.Now, Coalesce: true,
		OnChange: func(c regionsim.Change) {
			if c.Region == us {
				seen = append(seen, c)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	key := func(k string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": s(k), "sk": s("record")}
	}
	put := func(k, v string) {
		item := key(k)
		item["v"] = s(v)
		if _, err := p.db(eu).PutItem(ctx(t), &dynamodb.PutItemInput{TableName: aws.String(p.tables[eu]), Item: item}); err != nil {
			t.Fatal(err)
		}
		if _, err := rep.Step(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	put("k1", "held")
	clock.Advance(2 * time.Second)
	if err := rep.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	seen = nil
	put("k1", "claimed")
	put("k1", "firing")
	put("k2", "other")
	put("k1", "completed")
	clock.Advance(2 * time.Second)
	if err := rep.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	v := func(img map[string]types.AttributeValue) string {
		if img == nil {
			return "-"
		}
		return img["v"].(*types.AttributeValueMemberS).Value
	}
	var got []string
	for _, c := range seen {
		got = append(got, c.Event+" "+v(c.Old)+">"+v(c.New))
	}
	if want := "INSERT ->other,MODIFY held>completed"; strings.Join(got, ",") != want {
		t.Fatalf("us's stream: %v; want %s", got, want)
	}
	if rep.Coalesced() != 2 {
		t.Fatalf("coalesced %d; want 2", rep.Coalesced())
	}
}
