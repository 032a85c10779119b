"""The verl adapter under verl 0.9.1's asynchronous trainers, as far as a CPU allows (issue 35,
item 3): weight syncs land between and inside episodes (a sync aborts the generations in
flight and verl's client resumes them on the new weights), every episode still reaches the
trainer token-exact, its ledger says which weights sampled each action, and verl's own
staleness fields (``min_global_steps`` / ``max_global_steps``) say the same.

* ``colocate_async`` (the v1 trainer's ``trainer.v1.trainer_mode=colocate_async``): verl's
  ``AgentLoopWorkerTQ`` (unwrapped from its ``ray.remote``) runs each prompt in the background
  and puts every output, with its replay-buffer tags, into TransferQueue.  TransferQueue's
  controller is a Ray actor that did not start on this machine (it hung), so its three calls
  are recorded in memory instead: what the worker puts is what the trainer would read.
* the fully-async trainer (``verl.experimental.fully_async_policy``): its rollouter hands
  each sample to the legacy ``AgentLoopWorker`` (prepared by ``prepare_single_generation_data``)
  and its trainer assembles the batch with ``assemble_batch_from_rollout_samples``, which
  reads the versions (``abs(max - min)``: a loop that leaves them ``None`` breaks it).

Both use verl's ``FullyAsyncLLMServerClient`` and load balancer; the server and Ray's
transport are stand-ins (``tests/fixtures/verl_async.py``).  Runs in ``.venv-verl``.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verl", reason="verl is not installed here; run `make test-verl`")
torch = pytest.importorskip("torch")

from tests.fixtures import verl_async as va  # noqa: E402
from tests.fixtures import verl_worker as vw  # noqa: E402
from tests.fixtures.scripted_server import HALLUCINATED, ScriptedServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
AGENT_FILE = ROOT / "trainers" / "verl" / "agent_loop.yaml"
PAIRS = [(6, 7), (3, 9), (4, 8), (5, 5)]
TASKS = [{"id": f"t/{a}x{b}", "question": f"What is ${a} \\times {b}$?", "answer": str(a * b)}
         for a, b in PAIRS]
ENV = {"protocol": "torl", "tasks": TASKS}


def scripts(eos: str) -> dict[str, list[str]]:
    """Each task's two actions: a long-ish tool call (a sync lands inside it) and the answer."""
    return {f"{a} \\times {b}": [
        f"I will multiply the two numbers with Python to be completely sure of the result."
        f"\n```python\nprint({a} * {b})\n```\n```output{HALLUCINATED}",
        f"The product is $\\boxed{{{a * b}}}$.{eos}"] for a, b in PAIRS}


@pytest.fixture
def setup(tmp_path, qwen_tok, monkeypatch):
    """The shipped agent file with the env from environment variables, verl's config, the
    dataset, the server stand-in, and every ledger as ``TIRAgentLoop`` hands it to verl."""
    from tir_envs.trainers.common.env_config import EnvConfig
    from tir_envs.trainers.verl import agent_loop
    from tir_envs.trainers.verl.dataset import rows

    monkeypatch.setenv("TIR_ENV_ID", "tir/MathCode-v0")
    monkeypatch.setenv("TIR_ENV_KWARGS", json.dumps(ENV))
    monkeypatch.delenv("TIR_ENV_CONFIG", raising=False)
    data = vw.parquet(tmp_path / "d.parquet", rows(EnvConfig("tir/MathCode-v0", ENV), qwen_tok))
    model = vw.model_dir(tmp_path, qwen_tok)
    config = vw.compose(model, AGENT_FILE, data, 512, 512, overrides=[
        "actor_rollout_ref.rollout.n=1", "actor_rollout_ref.rollout.multi_turn.enable=True",
        "trainer.v1.trainer_mode=colocate_async"])
    server = va.VersionedServer(ScriptedServer(qwen_tok, scripts(qwen_tok.eos_token)),
                                qwen_tok.eos_token_id, global_steps=0)
    ledgers: list[dict] = []
    output = agent_loop.TIRAgentLoop.output

    def spy(self, traj, *args, **kwargs):
        ledgers.append(traj.to_dict())
        return output(self, traj, *args, **kwargs)

    monkeypatch.setattr(agent_loop.TIRAgentLoop, "output", spy)
    from transformers import AutoTokenizer
    return config, data, server, ledgers, AutoTokenizer.from_pretrained(model)


async def trainer(server: va.VersionedServer, rollout: asyncio.Future) -> int:
    """Two weight syncs: one inside the first actions, one later; returns how many landed."""
    done = 0
    for step, tokens in ((1, 20), (2, 140)):
        mark = asyncio.ensure_future(server.reached(tokens).wait())
        await asyncio.wait([mark, rollout], return_when=asyncio.FIRST_COMPLETED)
        mark.cancel()
        if rollout.done():
            break
        await va.sync(server, step)
        done += 1
    return done


def action_versions(ledger: dict, server: va.VersionedServer) -> list[list[int]]:
    """Per action of ``ledger``: the weights version of each of its tokens, from the server's
    requests (an aborted generation and its resumption together make one action)."""
    seq = ledger["prompt_ids"] + ledger["token_ids"]
    p, out = len(ledger["prompt_ids"]), []
    for turn in ledger["turns"]:
        a, b = turn["action_span"]
        pos, versions = p + a, []
        while pos < p + b:
            (req,) = [r for r in server.requests if r["prompt"] == seq[:pos] and r["ids"]]
            n = min(len(req["ids"]), p + b - pos)
            assert req["ids"][:n] == seq[pos:pos + n]
            versions += req["versions"][:n]
            pos += n
        out.append(versions)
    return out


def check_ledger(ledger: dict, server) -> list[list[int]]:
    versions = action_versions(ledger, server)
    meta = ledger["metadata"]
    assert meta["policy_versions"] == [v[0] for v in versions]  # each action's first token
    assert meta["policy_version"] == min(min(v) for v in versions)
    return versions


def policy_end(ledger: dict) -> int:
    return max(i for i, m in enumerate(ledger["loss_mask"]) if m) + 1


def test_colocate_async_worker_puts_exact_ledgers_and_their_versions(setup, monkeypatch):
    from verl.trainer.ppo.v1 import agent_loop_tq
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    config, data, server, ledgers, tok = setup
    puts: list[tuple[list, object, list]] = []

    async def kv_batch_put(keys, fields=None, tags=None, partition_id=None):
        puts.append((keys, fields, tags))

    async def kv_put(key, partition_id=None, fields=None, tag=None):
        return None

    monkeypatch.setattr(agent_loop_tq.tq, "init", lambda *a, **kw: None)
    monkeypatch.setattr(agent_loop_tq.tq, "async_kv_put", kv_put)
    monkeypatch.setattr(agent_loop_tq.tq, "async_kv_batch_put", kv_batch_put)
    # the batch as the v1 trainer builds it (_fetch_one_gen_batch, _next_train_batch)
    dataset = RLHFDataset(data_files=[str(data)], tokenizer=tok, config=config.data)
    batch_dict = collate_fn([dataset[i] for i in range(len(dataset))])
    batch_dict["uid"] = np.array([str(uuid.uuid4()) for _ in TASKS], dtype=object)
    batch = tu.get_tensordict(batch_dict)
    tu.assign_non_tensor_data(batch, "global_steps", 1)

    async def main():
        worker = agent_loop_tq.AgentLoopWorkerTQ.__ray_actor_class__(
            config, llm_client=va.client(config, server))
        await worker.generate_sequences(batch)  # returns at once: the prompts run behind
        rollout = asyncio.ensure_future(asyncio.gather(*list(worker.background_tasks)))
        syncs = await trainer(server, rollout)
        await rollout
        return syncs

    assert asyncio.run(main()) == 2
    assert len(puts) == len(ledgers) == len(TASKS)
    by_prompt = {tuple(d["prompt_ids"]): d for d in ledgers}
    spans = []
    for keys, fields, tags in puts:
        (tag,) = tags
        row = fields[0]
        ledger = by_prompt[tuple(row["prompts"].tolist())]
        end = policy_end(ledger)
        assert row["responses"].tolist() == ledger["token_ids"][:end]
        assert row["response_mask"].tolist() == ledger["loss_mask"][:end]
        assert row["rollout_log_probs"].tolist() == ledger["logprobs"][:end]
        assert float(row["rm_scores"][-1]) == ledger["reward"] == 1.0
        versions = check_ledger(ledger, server)
        assert tag["status"] == "success" and tag["global_steps"] == 1
        assert tag["min_global_steps"] == ledger["metadata"]["policy_version"] \
            == min(min(v) for v in versions)
        assert tag["max_global_steps"] == max(max(v) for v in versions)
        spans.append(versions)
    actions = [v for s in spans for v in s]
    assert any(v[0] < v[-1] for v in actions)  # an action resumed on newer weights
    assert any(s[0][0] < s[-1][0] for s in spans)  # actions of one episode, different weights
    assert any(r["end"] == "aborted" for r in server.requests)


def test_fully_async_trainer_assembles_the_versions_of_exact_ledgers(setup):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.fully_async_policy.detach_utils import (
        RolloutSample, assemble_batch_from_rollout_samples, prepare_single_generation_data)
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    config, data, server, ledgers, tok = setup
    dataset = RLHFDataset(data_files=[str(data)], tokenizer=tok, config=config.data)
    samples = [prepare_single_generation_data(collate_fn([dataset[i]]), config)
               for i in range(len(dataset))]
    assert {s.non_tensor_batch["agent_name"][0] for s in samples} == {"tir_agent"}

    async def main():
        worker = AgentLoopWorker(config, llm_client=va.client(config, server))
        rollout = asyncio.ensure_future(asyncio.gather(
            *[worker.generate_sequences(s) for s in samples]))  # the rollouter streams them
        syncs = await trainer(server, rollout)
        return syncs, await rollout

    syncs, outputs = asyncio.run(main())
    assert syncs == 2
    batch = assemble_batch_from_rollout_samples(
        [RolloutSample(full_batch=o, sample_id=f"s{i}", epoch=0, rollout_status={})
         for i, o in enumerate(outputs)], tok, config)
    nt = batch.non_tensor_batch
    by_prompt = {tuple(d["prompt_ids"]): d for d in ledgers}
    spans = []
    for i, row in enumerate(vw.rows_of(batch)):
        ledger = by_prompt[tuple(row["prompt_ids"])]
        end = policy_end(ledger)
        assert row["response_ids"] == ledger["token_ids"][:end]
        assert row["loss_mask"] == ledger["loss_mask"][:end]
        assert row["reward"] == ledger["reward"] == 1.0
        versions = check_ledger(ledger, server)
        assert nt["min_global_steps"][i] == ledger["metadata"]["policy_version"]
        assert nt["max_global_steps"][i] == max(max(v) for v in versions)
        spans.append(versions)
    partial = sum(max(max(v) for v in s) != min(min(v) for v in s) for s in spans)
    assert batch.meta_info["fully_async/partial/total_partial_num"] == partial > 0
    assert list(batch.meta_info["trajectory_param_versions"]) == list(nt["max_global_steps"])


def test_a_sync_that_splits_a_stop_string_still_ends_the_action_at_it(setup):
    """vLLM looks for stop strings in a request's own output: resumed after a sync aborted it
    inside "```output", the generation does not see the stop and runs on into made-up text.
    The adapter cuts the action at the stop over all its ids (``cut_at_stop``), so it is what
    one uninterrupted request would have given; its first token's weights are 0, its last 1."""
    import tir_envs
    from tir_envs.rollout.policy import SamplingParams
    from tir_envs.trainers.verl.policy import VerlServerPolicy

    config, _, server, _, tok = setup
    env = tir_envs.make("tir/MathCode-v0", tokenizer=tok, **ENV)
    prompt = env.reset(options={"task": TASKS[0]})[0]["tokens"].tolist()
    codec = env.unwrapped.codec
    env.close()
    ids = tok.encode(scripts(tok.eos_token)["6 \\times 7"][0], add_special_tokens=False)
    k = next(n for n in range(1, len(ids) + 1) if "```output" in tok.decode(ids[:n]))
    policy = VerlServerPolicy(va.client(config, server), codec, {"logprobs": True}, "vllm",
                              [tok.eos_token_id])

    async def main():
        action = asyncio.ensure_future(policy.generate(prompt, ["```output"],
                                                       SamplingParams(max_tokens=200)))
        await server.reached(k - 1).wait()  # one token short of completing the stop
        await va.sync(server, 1)
        return await action

    gen = asyncio.run(main())
    first, resumed = server.requests
    assert (first["end"], resumed["end"]) == ("aborted", "completed")
    assert first["ids"] == ids[:k - 1]
    assert HALLUCINATED.strip() in tok.decode(resumed["ids"])  # the server ran past the stop
    assert gen.token_ids == ids[:k] and gen.stop_reason == "```output"
    assert gen.policy_version == 0 and (policy.oldest, policy.newest) == (0, 1)
