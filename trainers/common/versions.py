"""Which framework versions an adapter supports, checked when the adapter is imported.

The adapters hook into framework internals that move between releases (verl's agent-loop
classes, TRL's ``rollout_func`` contract), so each supports the versions its tests ran on and
refuses others with an error naming them, instead of failing later inside a training step.
"""

from __future__ import annotations

from importlib import metadata


class UnsupportedVersion(ImportError):
    """The installed framework is not a version the adapter was tested with."""


def require(distribution: str, supported: tuple[str, ...], extra: str) -> str:
    """The installed version of ``distribution``; raises ``UnsupportedVersion`` (naming the
    supported versions and the install command) when it is missing or another version."""
    hint = (f"install a supported one: pip install -e '.[{extra}]' (see docs/{extra}.md), or "
            f"pip install {distribution}=={supported[-1]}")
    try:
        version = metadata.version(distribution)
    except metadata.PackageNotFoundError as exc:
        raise UnsupportedVersion(f"the {extra} adapter needs {distribution} "
                                 f"({', '.join(supported)}), which is not installed; {hint}") \
            from exc
    if version not in supported:
        raise UnsupportedVersion(f"{distribution} {version} is not supported by the {extra} "
                                 f"adapter (supported: {', '.join(supported)}); {hint}")
    return version
