"""``tir-envs audit``: a reward-hacking probe for any env (see ``docs/audit.md``).

``audit(env_id, ...)`` drives the env with a battery of adversarial scripted policies
(``probes``), each built from the env's own protocol, compares each with an honest-but-wrong
baseline on the same tasks (``session``), and judges them HELD / PAYS / MASKS (``report``).
"""

from tir_envs.audit.probes import PROBES, Action, Probe, probe
from tir_envs.audit.report import HELD, MASKS, NOT_APPLICABLE, PAYS, AuditReport, ProbeResult
from tir_envs.audit.session import aaudit, audit

__all__ = ["audit", "aaudit", "AuditReport", "ProbeResult", "Probe", "PROBES", "probe",
           "Action", "HELD", "PAYS", "MASKS", "NOT_APPLICABLE"]
