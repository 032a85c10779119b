"""The whole battery: the probes built on a task's gold (``probes``, then ``hostile``'s
arguments a policy can choose to break a tool), then those that need none (``goldless``), then
the judge-injection probes (``judge_probes``), registered in that order in one list, ``PROBES``."""

from tir_envs.audit import hostile  # noqa: F401 - registers the hostile-argument probes
from tir_envs.audit import goldless  # noqa: F401 - registers the gold-free probes
from tir_envs.audit import judge_probes  # noqa: F401 - registers the judge-injection probes
from tir_envs.audit.probes import PROBES

__all__ = ["PROBES"]
