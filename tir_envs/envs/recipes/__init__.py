"""The protocols ``MathCodeEnv`` reproduces, by name: ``torl``, ``zerotir``, ``rite``."""

from __future__ import annotations

from tir_envs.envs.recipes.base import Recipe, RecipeDefaults
from tir_envs.envs.recipes.rite import RITERecipe
from tir_envs.envs.recipes.torl import ToRLRecipe
from tir_envs.envs.recipes.zerotir import ZeroTIRRecipe

RECIPES: dict[str, type[Recipe]] = {"torl": ToRLRecipe, "zerotir": ZeroTIRRecipe,
                                    "rite": RITERecipe}


def get_recipe(recipe: str | Recipe) -> Recipe:
    """A recipe instance from its name (or pass one through)."""
    if isinstance(recipe, Recipe):
        return recipe
    key = str(recipe).lower().replace("-", "").replace("_", "")
    if key not in RECIPES:
        raise ValueError(f"unknown recipe {recipe!r}; choose one of {sorted(RECIPES)}")
    return RECIPES[key]()


__all__ = ["Recipe", "RecipeDefaults", "RECIPES", "get_recipe", "ToRLRecipe", "ZeroTIRRecipe",
           "RITERecipe"]
