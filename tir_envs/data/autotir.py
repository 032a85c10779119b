"""AutoTIR's task sets: evaluation sets by domain, and a training mix that never overlaps them.

Every task carries ``meta["domain"]`` (``knowledge``, ``math``, ``instruction``,
``multiple_choice``) and ``meta["tool"]``, the ground-truth tool of its domain (``search`` for
knowledge, ``python`` for math, ``None`` where tool use is free); the reward and the Tool
Selection metric read them.

Evaluation sets (AutoTIR's ten-benchmark table): ``hotpotqa``, ``2wiki``, ``musique``,
``bamboogle`` (the 500/125-question samples R1-Searcher and AutoTIR evaluate on), ``aime24``,
``aime25``, ``math500``, ``gsm8k``, ``logiqa``, ``ifeval``; also ``nq`` and
``hotpotqa_distractor``, which the benchmark suites use.

Training (``autotir-train``): knowledge questions from the full HotpotQA dev list minus every
HotpotQA evaluation question, generated math problems, and generated instruction prompts,
sampled with domain weights.  The shipped math and QA test sets are all evaluation sets, so
nothing else is available offline; ``autotir_mix`` takes your own pools.
"""

from __future__ import annotations

import functools
import random
from typing import Callable, Mapping, Sequence

from tir_envs.task import Task

DOMAIN_TOOL = {"knowledge": "search", "math": "python", "instruction": None,
               "multiple_choice": None}
DEFAULT_WEIGHTS = {"knowledge": 0.4, "math": 0.4, "instruction": 0.2}
TRAIN_SIZE = 4000


def _tagged(tasks: Sequence[Task], domain: str) -> list[Task]:
    """The tasks with their domain and ground-truth tool in ``meta``."""
    return [Task(t.id, t.question, t.answer, {**t.meta, "domain": domain,
                                              "tool": DOMAIN_TOOL[domain]}) for t in tasks]


def _qa(name: str) -> Callable[[], list[Task]]:
    def load() -> list[Task]:
        from tir_envs.data.qa import load_qa
        return _tagged(load_qa(name), "knowledge")
    return load


def _math(name: str) -> Callable[[], list[Task]]:
    def load() -> list[Task]:
        from tir_envs.data.math import load_math_tasks
        return _tagged(load_math_tasks(name), "math")
    return load


def _logiqa() -> list[Task]:
    from tir_envs.data.logiqa import load_logiqa
    return load_logiqa()


def _ifeval() -> list[Task]:
    from tir_envs.data.ifeval import load_ifeval
    return load_ifeval()


EVAL_SETS: dict[str, Callable[[], list[Task]]] = {
    "hotpotqa": _qa("hotpotqa_500"), "2wiki": _qa("2wiki"), "musique": _qa("musique"),
    "bamboogle": _qa("bamboogle"), "nq": _qa("nq"),
    "hotpotqa_distractor": _qa("hotpotqa_distractor"),
    "aime24": _math("aime2024"), "aime25": _math("aime2025"), "math500": _math("math500"),
    "gsm8k": _math("gsm8k"), "logiqa": _logiqa, "ifeval": _ifeval,
}


#: the math datasets' own names (``tir/MathCode-v0``'s ``aime2024``) for the same sets
EVAL_ALIASES = {"aime2024": "aime24", "aime2025": "aime25", "math-500": "math500",
                "math_500": "math500", "2wiki_500": "2wiki", "musique_500": "musique",
                "nq_open": "nq"}


def _norm(question: str) -> str:
    return " ".join(question.lower().split()).rstrip("?")


@functools.lru_cache(maxsize=1)
def eval_questions() -> frozenset[str]:
    """Every evaluation question, normalised (case and spacing), for overlap checks."""
    return frozenset(_norm(t.question) for load in EVAL_SETS.values() for t in load())


def knowledge_train_pool() -> list[Task]:
    """HotpotQA dev questions that are in no evaluation set."""
    from tir_envs.data.qa import load_qa
    held_out = eval_questions()
    return _tagged([t for t in load_qa("hotpotqa") if _norm(t.question) not in held_out],
                   "knowledge")


@functools.lru_cache(maxsize=4)
def default_pools(seed: int, size: int) -> dict[str, list[Task]]:
    """The offline training pools of ``autotir-train``, by domain."""
    from tir_envs.data.instructions import generate_instruction_tasks
    from tir_envs.data.math.synthetic import generate_math_tasks
    return {"knowledge": knowledge_train_pool(), "math": generate_math_tasks(size, seed),
            "instruction": generate_instruction_tasks(size, seed)}


def autotir_mix(pools: Mapping[str, Sequence[Task]], weights: Mapping[str, float],
                size: int, seed: int = 0) -> list[Task]:
    """``size`` tasks drawn from ``pools`` by domain ``weights`` (without replacement within a
    domain while it lasts), in a seeded order."""
    unknown = set(weights) - set(pools)
    if unknown:
        raise ValueError(f"weights name domains without a pool: {sorted(unknown)}")
    if any(w < 0 for w in weights.values()) or not sum(weights.values()) > 0:
        raise ValueError(f"weights must be non-negative with a positive sum, got {dict(weights)}")
    rng = random.Random(seed)
    shuffled = {d: rng.sample(list(pools[d]), len(pools[d])) for d in weights if pools[d]}
    domains = [d for d in weights if d in shuffled]
    picks = rng.choices(domains, [weights[d] for d in domains], k=size)
    drawn = {d: 0 for d in domains}
    out = []
    for d in picks:
        pool = shuffled[d]
        out.append(pool[drawn[d] % len(pool)])
        drawn[d] += 1
    return out


def autotir_train(size: int = TRAIN_SIZE, seed: int = 0,
                  weights: Mapping[str, float] = DEFAULT_WEIGHTS) -> list[Task]:
    """The default training mix (see the module docstring)."""
    return autotir_mix(default_pools(seed, size), weights, size, seed)


def load_autotir_tasks(name: str) -> list[Task]:
    """``autotir-train`` or an evaluation set by name."""
    if name == "autotir-train":
        return autotir_train()
    name = EVAL_ALIASES.get(name, name)
    if name not in EVAL_SETS:
        raise ValueError(f"unknown AutoTIR task set {name!r}; choose autotir-train or one of "
                         f"{sorted(EVAL_SETS)}, or pass a JSONL path")
    return EVAL_SETS[name]()
