"""``tir-envs audit``: a reward-hacking probe for any env (see ``docs/audit.md``).

``audit(env_id, ...)`` drives the env with a battery of adversarial scripted policies
(``probes``), each built from the env's own protocol, compares each with an honest-but-wrong
baseline on the same tasks (``session``), and judges them HELD / PAYS / MASKS (``report``).
The package itself is callable, so ``tir_envs.audit(env_id, ...)`` runs ``audit``.
"""

import sys
import types

from tir_envs.audit.probes import PROBES, Action, Probe, probe
from tir_envs.audit.report import HELD, MASKS, NOT_APPLICABLE, PAYS, AuditReport, ProbeResult
from tir_envs.audit.session import aaudit, audit

__all__ = ["audit", "aaudit", "AuditReport", "ProbeResult", "Probe", "PROBES", "probe",
           "Action", "HELD", "PAYS", "MASKS", "NOT_APPLICABLE"]


class _Package(types.ModuleType):
    """This package, callable: ``tir_envs.audit(env_id, ...)`` is ``audit(env_id, ...)``."""

    def __call__(self, *args, **kwargs) -> AuditReport:
        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _Package
