package ledger

// RecipeStamps are the recipe stamps a run records (RFC 0150 §E): the
// activity identity recipe and the semantic request recipe its effects use.
// Runs keep the stamps they were created with; forks inherit them for
// recorded history. Each ledger Record also carries the recipe that made its
// own identity (IdentityRecipe) and digest (SemanticRecipe), and a reader
// uses the recorded values, never recomputing them under another recipe.
type RecipeStamps struct {
	ActivityIdentityRecipe string `json:"activityIdentityRecipe"`
	SemanticRequestRecipe  string `json:"semanticRequestRecipe"`
}

// CurrentRecipes returns the stamps for a new run: ActivityIdentityRecipe
// ("openwop-activity-v2") and SemanticRecipeV2
// ("openwop-semantic-request-v2").
func CurrentRecipes() RecipeStamps {
	return RecipeStamps{ActivityIdentityRecipe: ActivityIdentityRecipe, SemanticRequestRecipe: SemanticRecipeV2}
}
