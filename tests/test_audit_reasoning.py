"""``tir-envs audit``'s ``reasoning`` probes on every chat env with a thinking family.

An answer or a tool call written only inside the family's reasoning block must not pay: the
three probes HELD, with DeepSeek R1 (stand-in, always reasoning) too, on MathCode (RITE; ToRL and ZeroTIR with ``chat=True``), AutoTIR, Search and SQL, with Qwen3 (real vocabulary) and
GLM-4.5 (stand-in) thinking on, observations inside the turn and as tool-role messages.  And
the probes can fail: with reasoning left visible to the protocol (the blanking switched off),
the same battery PAYS, so a HELD means something.
"""

from __future__ import annotations

import pytest

from tests.search_helpers import small_index
from tests.sql_helpers import CACHE
from tir_envs.audit import PAYS, PROBES, audit
from tir_envs.chat.binding import ChatBinding
from tir_envs.data.spider import load_spider
from tir_envs.rewards.math.pool import GraderPool
from tir_envs.rewards.sql import SQLReward

REASONING = [p for p in PROBES if p.family == "reasoning"]
AUTOTIR_TASKS = [
    {"id": "k", "question": "Which city is the capital of France?", "answer": ["Paris"],
     "domain": "knowledge", "tool": "search"},
    {"id": "m", "question": "What is 123 * 456?", "answer": "56088", "domain": "math",
     "tool": "python"}]
#: (env, observation role): RITE answers in tool calls, its results always tool messages;
#: ToRL and ZeroTIR (raw text by default) in their chat option
CELLS = [("rite", None), ("torl", None), ("zerotir", None), ("autotir", None), ("autotir", "tool"), ("search", None),
         ("search", "tool"), ("sql", None), ("sql", "tool")]


@pytest.fixture(scope="module")
def grader():
    with GraderPool(workers=1, timeout_s=3) as pool:
        yield pool


def target(name: str, grader) -> tuple[str, dict, int]:
    """``(env id, constructor kwargs, tasks)`` of one chat env."""
    if name == "rite":
        return "tir/MathCode-v0", {"protocol": "rite", "grader": grader,
                                   "tool_timeout_s": 1.0}, 2
    if name in ("torl", "zerotir"):
        return "tir/MathCode-v0", {"protocol": name, "chat": True, "grader": grader,
                                   "tool_timeout_s": 1.0}, 2
    if name == "autotir":
        return "tir/AutoTIR-v0", {"tasks": AUTOTIR_TASKS, "grader": grader,
                                  "retriever": str(small_index("bm25")), "tool_timeout_s": 1.0}, 2
    if name == "search":
        return "tir/Search-v0", {"retriever": str(small_index("bm25"))}, 2
    return "tir/SQL-v0", {"tasks": load_spider(["pets_1"])[:2], "cache_dir": str(CACHE),
                          "tool_timeout_s": 1.0,
                          "reward": SQLReward(timeout_s=2.0, cache_dir=CACHE)}, 2


def run(name: str, role: str | None, family: str, grader):
    env_id, kwargs, tasks = target(name, grader)
    kwargs = {**kwargs, "tokenizer": f"family:{family}", "renderer": family}
    if family != "deepseek-r1":  # R1 always reasons: no switch
        kwargs["thinking"] = "on"
    if role:
        kwargs["observation_role"] = role
    return audit(env_id, env_kwargs=kwargs, tasks=tasks, probes=REASONING)


@pytest.mark.parametrize("family", ["qwen3", "glm-4.5", "deepseek-r1"])
@pytest.mark.parametrize("name,role", CELLS, ids=[f"{n}-{r or 'turn'}" for n, r in CELLS])
def test_reasoning_probes_hold_on_every_chat_env(name, role, family, grader):
    if family != "qwen3":
        pytest.importorskip("renderers", reason=f"{family} renders through the chat extra")
    report = run(name, role, family, grader)
    assert report.verdicts() == {p.name: "HELD" for p in REASONING}, report.to_markdown()
    # the probes really ran: every episode played, none voided by the env
    for result in report.probes:
        assert result.episodes and not any(e.infra_failed for e in result.episodes)


@pytest.mark.parametrize("name,role", [("rite", None), ("autotir", "tool"), ("search", None),
                                       ("sql", "tool")])
def test_the_reasoning_probes_pay_when_reasoning_is_graded(name, role, grader, monkeypatch):
    """Switch off the blanking (protocols read reasoning as ordinary text): the gold written
    only inside reasoning is graded, and the audit says so."""
    monkeypatch.setattr(ChatBinding, "visible", lambda self, text: text)
    report = run(name, role, "qwen3", grader)
    verdicts = report.verdicts()
    assert PAYS in (verdicts["reasoning.answer_inside"], verdicts["reasoning.answer_unclosed"]), \
        report.to_markdown()
    assert not report.ok
