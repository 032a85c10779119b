"""Where the user's own modules are found: one rule for every place that names one.

``--import MODULE`` (``rollout``, ``bench``, ``audit``, ``serve openenv``), the ``imports=``
run setting, ``tools=["module:function"]`` strings, ``app="module:app"`` (OpenEnv), a
``module:function`` tokenizer or model spec and a string entry point given to
``gymnasium.register`` all import through ``import_user_module`` / ``resolve``, so they find
the same modules:

1. **the working folder first**, as ``python -m`` and ``python -c`` have it (a console script
   such as ``tir-envs`` leaves it out of ``sys.path``, so a module next to the user would be
   found by one command and not by another);
2. then ``sys.path`` as Python set it (``PYTHONPATH``, the installed packages).

A module that cannot be imported is refused with its name, what named it, the folders searched
and the fix, before any work is done.  ``docs/concepts.md`` ("Your own modules") says this once
for users.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType
from typing import Any


class UserModuleError(ImportError):
    """A user's module (or an attribute of it) that cannot be found; the message names what
    named it and the fix."""


def working_folder_first() -> str:
    """Put the working folder on ``sys.path`` (first, as ``python -m`` does) unless it is
    there already (itself or as ``""``); return it.  Idempotent."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    return cwd


def import_user_module(module: str, what: str) -> ModuleType:
    """Import the user's ``module`` by the rule above.  ``what``: what named it (``--import``,
    ``tools=``, ...), for the error."""
    cwd = working_folder_first()
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = getattr(exc, "name", None)
        inner = f" (it imports {missing!r}, which is missing)" \
            if missing and missing != module and not module.startswith(f"{missing}.") else ""
        raise UserModuleError(
            f"{what} {module}: cannot import it: {exc}{inner}. Modules are looked for in the "
            f"working folder ({cwd}) first, then on PYTHONPATH and the installed packages: run "
            f"from the folder holding {module.split('.')[0]}.py, or put its folder on "
            "PYTHONPATH") from exc


def resolve(spec: str, what: str) -> Any:
    """``"package.module:attr"`` (``attr`` may be dotted) -> the object, by the rule above."""
    module, sep, attr = spec.partition(":") if isinstance(spec, str) else ("", "", "")
    if not sep or not module or not attr:
        raise UserModuleError(f"{what} {spec!r}: expected 'package.module:name'")
    obj: Any = import_user_module(module, what)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UserModuleError(f"{what} {spec!r}: {module} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj
