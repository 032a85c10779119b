"""One episode loop: the rollout engine, the OpenRLHF executor, the benchmark harness and the
GRPO trainer all drive their episodes through ``EpisodeRunner``.

Each of the four is run with (1) a spy on the runner's reset phase, so every episode it drives
is seen, and (2) an env whose ``on_reset`` hook refuses some tasks, so the hook's effect shows
in what each caller hands back; then with ``tir/AutoTIR-v0`` and a task without a domain, so its
domain check (an ``on_reset`` hook) is seen to run on every path."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

from tests.fixtures.rollout_envs import LookupEnv
from tests.search_helpers import small_index
from tir_envs.envs.autotir import AutoTIREnv
from tir_envs.rollout import EpisodeRunner, ScriptedPolicy, collect
from tir_envs.rollout.runner import RunnerEpisode
from tir_envs.task import Task

ANSWER = ["<search>paris</search>", "<answer>42</answer><|im_end|>"]
OK = {"id": "ok-1", "question": "first?", "answer": "42"}
REFUSED = {"id": "refuse-1", "question": "second?", "answer": "7"}
NO_DOMAIN = {"id": "nodomain", "question": "What is 6 * 7?", "answer": "42"}


class Refusing(LookupEnv):
    """Refuses, in its ``on_reset`` hook, every task whose id starts with ``refuse``."""

    env_id = "test/Refusing-v0"

    def on_reset(self, task: Task) -> None:
        if task.id.startswith("refuse"):
            raise ValueError(f"task {task.id!r} refused by the hook")


@pytest.fixture
def episodes(monkeypatch) -> list[tuple[str, str]]:
    """``(env class, task id)`` of every episode the runner resets."""
    seen: list[tuple[str, str]] = []
    reset = RunnerEpisode.reset

    async def spy(self, seed=None):
        task = self.options.get("task")
        seen.append((type(self.env.base).__name__, getattr(task, "id", str(task))))
        return await reset(self, seed)

    monkeypatch.setattr(RunnerEpisode, "reset", spy)
    return seen


@pytest.fixture(scope="module")
def autotir(qwen_tok):
    from tir_envs.rewards.math.pool import GraderPool
    from tir_envs.tools.search import open_retriever

    retriever = open_retriever(small_index("bm25"))
    with GraderPool(workers=1, timeout_s=30) as grader:
        def make(tokenizer=qwen_tok, **kw):
            return AutoTIREnv(tokenizer=tokenizer, retriever=retriever, grader=grader,
                              tasks=[{"id": "m", "question": "1+1?", "answer": "2",
                                      "meta": {"domain": "math"}}], **kw)
        yield make


# ------------------------------------------------------------------------------ the engine
def test_the_engine(qwen_tok, episodes, autotir):
    out = collect(Refusing, ScriptedPolicy(ANSWER, qwen_tok), [OK, REFUSED], progress=False)
    assert episodes == [("Refusing", "ok-1"), ("Refusing", "refuse-1")]
    assert out[0].reward == 1.0 and out[0].failure is None
    assert out[1].failure.kind == "infra" and "refused by the hook" in out[1].failure.message
    # AutoTIR's domain check, on a task given at reset
    bad = collect(autotir, ScriptedPolicy(ANSWER, qwen_tok), [NO_DOMAIN], progress=False)[0]
    assert bad.infra_failed and "meta['domain']" in bad.failure.message


# ------------------------------------------------------------------------------ OpenRLHF
def test_the_openrlhf_executor(qwen_tok, episodes, autotir):
    pytest.importorskip("openrlhf")
    from tests.test_openrlhf_agent import ScriptedEngine, run
    from tir_envs.trainers.openrlhf.executor import TIRAgentExecutor

    executor = TIRAgentExecutor(lambda tok: Refusing(tokenizer=tok, tasks=[OK, REFUSED]))
    result = run(executor, "ok-1", ScriptedEngine(qwen_tok, ANSWER), qwen_tok)
    assert result["reward"] == 1.0
    with pytest.raises(ValueError, match="refused by the hook"):
        run(executor, "refuse-1", ScriptedEngine(qwen_tok, ANSWER), qwen_tok)
    assert episodes == [("Refusing", "ok-1"), ("Refusing", "refuse-1")]
    assert len(executor.pool.free) == 1  # the refused episode's env went back to the pool
    auto = TIRAgentExecutor(lambda tok: autotir(tok))
    with pytest.raises(ValueError, match=r"meta\['domain'\]"):
        run(auto, json.dumps(NO_DOMAIN), ScriptedEngine(qwen_tok, ANSWER), qwen_tok)
    assert episodes[-1] == ("AutoTIREnv", "nodomain")


# ------------------------------------------------------------------------------ the harness
class RefusesListed(LookupEnv):
    """Refuses, in its ``on_reset`` hook, the task ids in ``refused`` (set by the test)."""

    env_id = "test/RefusesListed-v0"
    refused: set[str] = set()

    def on_reset(self, task: Task) -> None:
        if task.id in self.refused:
            raise ValueError(f"task {task.id!r} refused by the hook")


@pytest.fixture
def refusing_suite(monkeypatch):
    """A suite over AIME 2024 items, on an env registered for the test that refuses item 1."""
    from tir_envs.bench import SUITES, Part, Suite, register
    from tir_envs import registry

    aime = SUITES["aime24"].parts[0]
    monkeypatch.setattr(RefusesListed, "refused", {aime.load()[1].id})
    spec = f"{__name__}:RefusesListed"
    monkeypatch.setitem(registry.ENV_SPECS, RefusesListed.env_id, spec)
    gym.register(RefusesListed.env_id, entry_point=spec)
    register(Suite("test-refusing", RefusesListed.env_id, (aime,)))
    register(Suite("test-autotir-nodomain", "tir/AutoTIR-v0",
                   (Part(aime.name, aime.file, aime.count, aime.sha256, aime.load, "math"),)))
    yield RefusesListed.refused
    SUITES.pop("test-refusing")
    SUITES.pop("test-autotir-nodomain")
    gym.registry.pop(RefusesListed.env_id)


def test_the_bench_harness(qwen_tok, episodes, refusing_suite, tmp_path, autotir):
    from tir_envs.bench import run
    from tir_envs.bench.store import RunStore

    run("test-refusing", ScriptedPolicy(["<answer>1</answer>"], qwen_tok), out=tmp_path / "a",
        limit=2, progress=False, report=False, concurrency=1)
    records = RunStore(tmp_path / "a").suite_records("test-refusing")
    assert [r["infra_failed"] for r in records] == [False, True]
    assert records[1]["task_id"] in refusing_suite
    assert "refused by the hook" in records[1]["trajectory"]["failure"]["message"]
    assert [c for c, _ in episodes] == ["RefusesListed"] * 2
    # AutoTIR: the suite's math items carry no domain, and the env refuses them by name
    with pytest.raises(ValueError, match=r"meta\['domain'\]"):
        run("test-autotir-nodomain", ScriptedPolicy(["x"], qwen_tok), out=tmp_path / "b",
            limit=1, progress=False, report=False,
            env_kwargs={"retriever": small_index("bm25")})


# ------------------------------------------------------------------------------ GRPO
def test_the_grpo_trainer(qwen_tok, episodes, autotir, tmp_path):
    pytest.importorskip("torch")
    from tir_envs.trainers.grpo.config import GRPOConfig
    from tir_envs.trainers.grpo.trainer import GRPOTrainer

    toy = Path(__file__).resolve().parents[1] / "trainers" / "grpo" / "configs" / "toy.yaml"
    config = GRPOConfig.load(toy, [f"train.output_dir={tmp_path}", "train.tensorboard=false",
                                   "rollout.tasks_per_step=2", "rollout.samples_per_task=2",
                                   "rollout.max_tokens=64"])
    trainer = GRPOTrainer(config, env=lambda: Refusing(tokenizer=qwen_tok),
                          tasks=[OK, REFUSED], policy=ScriptedPolicy(ANSWER, qwen_tok))
    assert isinstance(trainer.runner, EpisodeRunner)
    groups = trainer._rollout(2)
    assert sorted(episodes) == [("Refusing", "ok-1")] * 2 + [("Refusing", "refuse-1")] * 2
    by_task = {g.trajectories[0].task_id: g for g in groups}
    assert all(t.reward == 1.0 for t in by_task["ok-1"].trajectories)
    refused = by_task["refuse-1"].trajectories
    assert all("refused by the hook" in t.failure.message for t in refused)
    trainer.close()
    auto = GRPOTrainer(config, env=lambda: autotir(), tasks=[NO_DOMAIN],
                       policy=ScriptedPolicy(ANSWER, qwen_tok))
    bad = [t for g in auto._rollout(1) for t in g.trajectories]
    assert bad and all("meta['domain']" in t.failure.message for t in bad)
    auto.close()
