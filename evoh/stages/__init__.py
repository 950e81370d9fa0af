"""Pipeline stages: each a ``run(recipe, workspace, ...)`` that talks to other stages only through workspace files."""
