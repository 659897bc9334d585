package ledger

import (
	"fmt"

	"github.com/idemkit/idemkit/ledger/semantic"
)

// RecipeStamps are the recipe stamps a run records: the
// activity identity recipe and the semantic request recipe its effects use.
// Runs keep the stamps they were created with; forks inherit them for
// recorded history. Each ledger Record also carries the recipe that made its
// own identity (IdentityRecipe) and digest (SemanticRecipe), and a reader
// uses the recorded values, never recomputing them under another recipe.
//
// The JSON form is the run record's two members:
//
//	{"activityIdentityRecipe":"openwop-activity-v2","semanticRequestRecipe":"openwop-semantic-request-v2"}
type RecipeStamps struct {
	ActivityIdentityRecipe string `json:"activityIdentityRecipe"`
	SemanticRequestRecipe  string `json:"semanticRequestRecipe"`
}

// CurrentRecipes returns the stamps for a new run: ActivityIdentityRecipe
// ("openwop-activity-v2") and semantic.RecipeV2
// ("openwop-semantic-request-v2").
func CurrentRecipes() RecipeStamps {
	return RecipeStamps{ActivityIdentityRecipe: ActivityIdentityRecipe, SemanticRequestRecipe: semantic.RecipeV2}
}

// Validate reports whether both stamps are present (a run record without
// them cannot say how its effects were identified).
func (s RecipeStamps) Validate() error {
	if s.ActivityIdentityRecipe == "" || s.SemanticRequestRecipe == "" {
		return fmt.Errorf("%w: a run must stamp activityIdentityRecipe and semanticRequestRecipe", ErrUnsupportedRecipe)
	}
	return nil
}

// ActivityIdentity computes an activity identity for a run stamped with s,
// under the run's own recipe: ActivityIdentity for "openwop-activity-v2";
// any other stamp (a v1 history) is ErrUnsupportedRecipe, never a v2
// identity computed in its place. Executors of an existing run derive
// identities through its stamps, so a recipe upgrade of the kit cannot
// silently re-key the run's recorded effects.
func (s RecipeStamps) ActivityIdentity(a Activity) (Identity, error) {
	if s.ActivityIdentityRecipe != ActivityIdentityRecipe {
		return Identity{}, fmt.Errorf("%w: activity identity recipe %q (this kit computes %q)", ErrUnsupportedRecipe, s.ActivityIdentityRecipe, ActivityIdentityRecipe)
	}
	return ActivityIdentity(a)
}

// SemanticDigest computes the semantic request digest of r for a run
// stamped with s, under the run's own recipe, and returns it with that
// recipe (for Effect.RequestDigest and Effect.SemanticRecipe). A stamp other
// than semantic.RecipeV2 is ErrUnsupportedRecipe.
func (s RecipeStamps) SemanticDigest(r semantic.Request) (digest, recipe string, err error) {
	if s.SemanticRequestRecipe != semantic.RecipeV2 {
		return "", "", fmt.Errorf("%w: semantic request recipe %q (this kit computes %q)", ErrUnsupportedRecipe, s.SemanticRequestRecipe, semantic.RecipeV2)
	}
	d, err := semantic.DigestV2(r)
	if err != nil {
		return "", "", err
	}
	return d, semantic.RecipeV2, nil
}
