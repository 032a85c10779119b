"""The OpenRLHF adapter under OpenRLHF 0.11.2's async trainer (``--train.async_enable``), as far
as a CPU allows (issue 35, item 3): the weights change between and within episodes, every
episode still reaches the trainer token-exact, and its ledger says which weights sampled it.

Real: OpenRLHF's ``RolloutRayActor`` (its own ``__init__`` loads ``trainers/openrlhf/agent.py``
with ``_load_agent_executor``; its ``generate_responses``, ``generate``, ``update_weight``,
``pause_generation`` and ``resume_generation`` are what the async trainer calls), its
``MultiTurnAgentExecutor`` loop, and ``SamplesGenerator._process_response_into_experience``,
which makes the ``Experience`` the trainer trains on.  Stand-ins: vLLM's engine
(``tests.fixtures.cpu_vllm``: scripted tokens, streamed one per step, parameters loaded one by
one), and Ray's transport: the actor's methods run as coroutines on one event loop, which is
how a Ray async actor runs them.  ``GenerateSamplesActor`` / ``TrainingActor`` import
DeepSpeed (CUDA), so the harness below makes their calls on the rollout actor, in their order:
with the default async mode a lock keeps a weight sync from overlapping a batch's generation
(a queue of one: the next batch is sampled while the last trains); with
``--train.partial_rollout_enable`` the trainer pauses generation, pushes every parameter and
resumes, under episodes still generating.
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("openrlhf")
pytest.importorskip("ray")

from tests.fixtures import cpu_vllm  # noqa: E402
from tests.fixtures.scripted_server import HALLUCINATED, ScriptedServer  # noqa: E402
from tir_envs.rollout.runner import RunnerEpisode  # noqa: E402

AGENT_FILE = Path(__file__).resolve().parents[1] / "trainers" / "openrlhf" / "agent.py"
MAX_LEN, MAX_NEW = 8192, 1024  # --data.max_len, --rollout.max_new_tokens
PAIRS = [(6, 7), (3, 9), (4, 8), (5, 5), (7, 9), (2, 11)]
TASKS = [{"id": f"t/{a}x{b}", "question": f"What is ${a} \\times {b}$?", "answer": str(a * b)}
         for a, b in PAIRS]


def scripts(eos: str) -> dict[str, list[str]]:
    """Each task's two actions: a long-ish tool call (long enough for a sync to land inside
    it) and the answer."""
    return {f"{a} \\times {b}": [
        f"I will multiply the two numbers with Python to be completely sure of the result."
        f"\n```python\nprint({a} * {b})\n```\n```output{HALLUCINATED}",
        f"The product is $\\boxed{{{a * b}}}$.{eos}"] for a, b in PAIRS}


@pytest.fixture(scope="module")
def openrlhf_classes():
    """OpenRLHF's rollout actor class (unwrapped from its ``ray.remote``) and its samples
    generator, imported over the stand-in vLLM; both forgotten afterwards, so no other test
    sees the stand-in."""
    before = set(sys.modules)
    cpu_vllm.install()
    try:
        from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
        from openrlhf.trainer.ray.vllm_engine import RolloutRayActor
        yield RolloutRayActor.__ray_actor_class__, SamplesGenerator
    finally:
        for name in set(sys.modules) - before:
            if name.split(".")[0] == "vllm" or name.startswith("openrlhf.trainer"):
                del sys.modules[name]


@pytest.fixture
def closed(monkeypatch):
    """Every ledger as its episode ends (``RunnerEpisode.close``), copied."""
    ledgers: list[dict] = []
    close = RunnerEpisode.close

    async def spy(self):
        traj = await close(self)
        if traj is not None:
            ledgers.append(traj.to_dict())
        return traj

    monkeypatch.setattr(RunnerEpisode, "close", spy)
    return ledgers


class Rollout:
    """The rollout actor over the CPU engine, and the trainer's calls on it."""

    def __init__(self, actor, engine, generator_cls, tokenizer):
        self.actor, self.engine, self.tok = actor, engine, tokenizer
        self.generator_cls = generator_cls
        self.syncs = 0

    @classmethod
    async def start(cls, classes, tokenizer, monkeypatch) -> "Rollout":
        actor_cls, generator_cls = classes
        monkeypatch.setenv("TIR_ENV_ID", "tir/MathCode-v0")
        monkeypatch.setenv("TIR_ENV_KWARGS", json.dumps({"protocol": "torl", "tasks": TASKS}))
        monkeypatch.delenv("TIR_ENV_CONFIG", raising=False)
        monkeypatch.setenv("RAY_ADDRESS", "stand-in")  # the actor reads it; no cluster here
        monkeypatch.setenv("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # restored afterwards
        engine = cpu_vllm.CPUEngine(ScriptedServer(tokenizer, scripts(tokenizer.eos_token)),
                                    tokenizer.eos_token_id)
        cpu_vllm.CPUEngine.current = engine
        actor = actor_cls.__new__(actor_cls)
        await actor_cls.__init__(actor, model="tiny", agent_func_path=str(AGENT_FILE),
                                 num_gpus=1, distributed_executor_backend="uni",
                                 full_determinism=False, max_model_len=MAX_LEN)
        return cls(actor, engine, generator_cls, tokenizer)

    async def generate(self, tasks: list[dict]) -> list:
        """One batch as ``SamplesGenerator`` dispatches it (its sampling params, one
        ``generate_responses`` per prompt) and turns it into ``Experience``s."""
        params = cpu_vllm.SamplingParams(temperature=1.0, top_p=1.0, top_k=-1,
                                         max_tokens=MAX_NEW, min_tokens=1,
                                         skip_special_tokens=False, logprobs=1)
        responses = await asyncio.gather(*[self.actor.generate_responses(  # Ray sends each
            prompt=None, label=t["id"], sampling_params=copy.deepcopy(params),  # call a copy
            max_length=MAX_LEN,
            hf_tokenizer=self.tok, num_samples=1) for t in tasks])
        return [self.generator_cls._process_response_into_experience(None, r, max_len=MAX_LEN)
                for group in responses for r in group]

    async def sync_weights(self) -> None:
        """``PolicyModelActor.broadcast_to_vllm``: every parameter, the last with
        ``empty_cache=True``."""
        for i, name in enumerate(cpu_vllm.PARAMS):
            await self.actor.update_weight(name, dtype="bfloat16", shape=(8, 8),
                                           empty_cache=i == len(cpu_vllm.PARAMS) - 1)
        self.syncs += 1


def truth(ledger: dict, engine: cpu_vllm.CPUEngine) -> list[list[int]]:
    """Per action of ``ledger``: which weights sampled each of its tokens (the engine's
    record of the request that produced it, found by its context)."""
    seq = ledger["prompt_ids"] + ledger["token_ids"]
    p, out = len(ledger["prompt_ids"]), []
    for turn in ledger["turns"]:
        a, b = turn["action_span"]
        (req,) = [r for r in engine.requests if r["prompt"] == seq[:p + a]]
        assert req["ids"] == seq[p + a:p + b]  # the ledger holds exactly the sampled ids
        assert not any(req["mixed"])  # no token was sampled from half-synced weights
        out.append(req["versions"])
    return out


def check(experiences: list, ledgers: list[dict], engine) -> list[list[list[int]]]:
    """What the trainer receives equals each episode's ledger, and the versions the ledger and
    the sample carry are the weights that sampled it; returns the per-token truth."""
    by_seq = {tuple(d["prompt_ids"] + d["token_ids"]): d for d in ledgers}
    assert len(by_seq) == len(ledgers) == len(experiences)
    spans = []
    for exp in experiences:
        seq = exp.sequences[0].tolist()
        ledger = by_seq[tuple(seq)]
        p = len(ledger["prompt_ids"])
        assert exp.action_mask[0].tolist() == ([0] * p + ledger["loss_mask"])[1:]
        assert exp.rollout_log_probs[0].tolist() == ([0.0] * p + ledger["logprobs"])[1:]
        assert exp.rewards.item() == ledger["reward"] == 1.0
        versions = truth(ledger, engine)
        meta = ledger["metadata"]
        assert meta["policy_versions"] == [v[0] for v in versions]  # each action's first token
        assert meta["policy_version"] == min(min(v) for v in versions)
        assert exp.info["tir/policy_version"].item() == meta["policy_version"]
        assert exp.info["tir/policy_version_max"].item() == max(max(v) for v in versions)
        spans.append(versions)
    return spans


def test_default_async_mode_batches_sampled_by_older_weights(openrlhf_classes, qwen_tok,
                                                            monkeypatch, closed):
    """``--train.async_enable``: the next batch is generated while the last one trains, a lock
    keeps the weight sync out of a batch's generation.  Each batch is one version, versions
    rise between batches, and a batch can be trained on by newer weights than sampled it:
    what the samples' ``tir/policy_version`` lets a staleness filter see."""
    batches = [TASKS[0:2], TASKS[2:4], TASKS[4:6]]

    async def main():
        rollout = await Rollout.start(openrlhf_classes, qwen_tok, monkeypatch)
        lock, queue, slots = asyncio.Lock(), asyncio.Queue(1), asyncio.Queue(1)
        slots.put_nowait(0)
        trained = []  # (the trainer's weights when it trains on the batch, the batch)

        async def generator():  # GenerateSamplesActor.fit
            for batch in batches:
                await slots.get()
                async with lock:
                    samples = await rollout.generate(batch)
                await queue.put(samples)
            await queue.put(None)

        async def trainer():  # TrainingActor.fit -> train_step -> broadcast_to_vllm
            while (samples := await queue.get()) is not None:
                slots.put_nowait(0)
                trained.append((rollout.syncs, samples))
                await asyncio.sleep(0)  # the PPO update
                async with lock:
                    await rollout.sync_weights()

        await asyncio.gather(generator(), trainer())
        return rollout, trained

    rollout, trained = asyncio.run(main())
    experiences = [e for _, batch in trained for e in batch]
    spans = check(experiences, closed, rollout.engine)
    per_batch = []
    for at, batch in trained:
        versions = {int(e.info["tir/policy_version"].item()) for e in batch}
        assert {int(e.info["tir/policy_version_max"].item()) for e in batch} == versions
        (version,) = versions  # the lock: one batch, one weights version
        per_batch.append(version)
        assert at >= version
    assert per_batch == sorted(per_batch) and len(set(per_batch)) >= 2  # changed between
    assert any(at > v for (at, _), v in zip(trained, per_batch))  # trained on, one step stale
    assert all(len(set(sum(s, []))) == 1 for s in spans)


def test_partial_rollout_syncs_weights_inside_episodes_and_actions(openrlhf_classes, qwen_tok,
                                                                  monkeypatch, closed):
    """``--train.partial_rollout_enable``: the trainer pauses generation, syncs and resumes
    while episodes are mid-action.  Actions sampled by two weights versions, episodes whose
    actions were sampled by different versions: still token-exact, and the ledger records the
    weights of each action's first token (``policy_versions``), the oldest as the episode's
    ``policy_version``; the sample carries the oldest and the newest."""
    tasks = TASKS[:4]

    async def main():
        rollout = await Rollout.start(openrlhf_classes, qwen_tok, monkeypatch)
        engine = rollout.engine
        batch = asyncio.ensure_future(rollout.generate(tasks))

        async def trainer():  # TrainingActor.broadcast_to_vllm with partial rollout
            for tokens in (20, 140):  # inside a first action, then later
                mark = asyncio.ensure_future(engine.reached(tokens).wait())
                await asyncio.wait([mark, batch], return_when=asyncio.FIRST_COMPLETED)
                mark.cancel()
                await rollout.actor.pause_generation()
                await rollout.sync_weights()
                await rollout.actor.resume_generation()

        await asyncio.gather(batch, trainer())
        return rollout, batch.result()

    rollout, experiences = asyncio.run(main())
    assert rollout.syncs == 2
    spans = check(experiences, closed, rollout.engine)
    actions = [v for episode in spans for v in episode]
    assert any(v[0] < v[-1] for v in actions)  # an action sampled across a sync
    assert any(episode[0][0] < episode[-1][0] for episode in spans)  # versions between actions
    assert max(e.info["tir/policy_version_max"].item() for e in experiences) == 2.0
