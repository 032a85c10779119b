"""``tir-envs audit``: a reward-hacking probe for any env (see ``docs/audit.md``).

``audit(env_id, ...)`` drives the env with a battery of adversarial scripted policies
(``probes``), each built from the env's own protocol, compares each with an honest-but-wrong
baseline on the same tasks (``session``), and judges them HELD / PAYS / MASKS / FORGES
(``report``).
The package itself is callable, so ``tir_envs.audit(env_id, ...)`` runs ``audit``.  The names
are imported on first use (the command line reads ``tir_envs.audit.cli`` alone).
"""

import importlib
import sys
import types
from typing import Any

_LAZY = {"PROBES": "battery", "Action": "probes", "Probe": "probes", "probe": "probes",
         "FORGES": "report", "HELD": "report", "MASKS": "report", "NOT_APPLICABLE": "report",
         "PAYS": "report",
         "AuditReport": "report", "ProbeResult": "report", "aaudit": "session",
         "audit": "session"}
__all__ = ["audit", "aaudit", "AuditReport", "ProbeResult", "Probe", "PROBES", "probe",
           "Action", "HELD", "PAYS", "MASKS", "FORGES", "NOT_APPLICABLE"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"tir_envs.audit.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'tir_envs.audit' has no attribute {name!r}")


class _Package(types.ModuleType):
    """This package, callable: ``tir_envs.audit(env_id, ...)`` is ``audit(env_id, ...)``."""

    def __call__(self, *args, **kwargs):
        from tir_envs.audit.session import audit
        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _Package
