"""The datasets shipped with the package, and their loaders (a ``Task`` is ``tir_envs.task``)."""
