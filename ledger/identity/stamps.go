package identity

import (
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/ledger/semantic"
)

// ErrUnsupportedRecipe is returned when a recipe stamp names a recipe this
// kit does not compute: an identity or digest is never computed under
// another recipe in its place.
var ErrUnsupportedRecipe = errors.New("ledger: unsupported recipe")

// Stamps are the recipe stamps a run records: the
// activity identity recipe and the semantic request recipe its effects use.
// Runs keep the stamps they were created with; forks inherit them for
// recorded history. Each ledger record also carries the recipe that made its
// own identity and digest, and a reader uses the recorded values, never
// recomputing them under another recipe.
//
// The JSON form is the run record's two members:
//
//	{"activityIdentityRecipe":"openwop-activity-v2","semanticRequestRecipe":"openwop-semantic-request-v2"}
type Stamps struct {
	ActivityIdentityRecipe string `json:"activityIdentityRecipe"`
	SemanticRequestRecipe  string `json:"semanticRequestRecipe"`
}

// CurrentStamps returns the stamps for a new run: ActivityRecipe
// ("openwop-activity-v2") and semantic.RecipeV2
// ("openwop-semantic-request-v2").
func CurrentStamps() Stamps {
	return Stamps{ActivityIdentityRecipe: ActivityRecipe, SemanticRequestRecipe: semantic.RecipeV2}
}

// Validate reports whether both stamps are present (a run record without
// them cannot say how its effects were identified).
func (s Stamps) Validate() error {
	if s.ActivityIdentityRecipe == "" || s.SemanticRequestRecipe == "" {
		return fmt.Errorf("%w: a run must stamp activityIdentityRecipe and semanticRequestRecipe", ErrUnsupportedRecipe)
	}
	return nil
}

// ActivityIdentity computes an activity identity for a run stamped with s,
// under the run's own recipe: FromActivity for "openwop-activity-v2";
// any other stamp (a v1 history) is ErrUnsupportedRecipe, never a v2
// identity computed in its place. Executors of an existing run derive
// identities through its stamps, so a recipe upgrade of the kit cannot
// silently re-key the run's recorded effects.
func (s Stamps) ActivityIdentity(a Activity) (Identity, error) {
	if s.ActivityIdentityRecipe != ActivityRecipe {
		return Identity{}, fmt.Errorf("%w: activity identity recipe %q (this kit computes %q)", ErrUnsupportedRecipe, s.ActivityIdentityRecipe, ActivityRecipe)
	}
	return FromActivity(a)
}

// SemanticDigest computes the semantic request digest of r for a run
// stamped with s, under the run's own recipe, and returns it with that
// recipe (for the effect's RequestDigest and SemanticRecipe). A stamp other
// than semantic.RecipeV2 is ErrUnsupportedRecipe.
func (s Stamps) SemanticDigest(r semantic.Request) (digest, recipe string, err error) {
	if s.SemanticRequestRecipe != semantic.RecipeV2 {
		return "", "", fmt.Errorf("%w: semantic request recipe %q (this kit computes %q)", ErrUnsupportedRecipe, s.SemanticRequestRecipe, semantic.RecipeV2)
	}
	d, err := semantic.DigestV2(r)
	if err != nil {
		return "", "", err
	}
	return d, semantic.RecipeV2, nil
}
