"""Every verl launch of docs/verl.md through verl's own entry point, then scaled to a CPU run to
a first update (issue 46).

``main_ppo`` is verl's ``python -m verl.trainer.main_ppo``: Hydra composes the doc's command,
``auto_set_device`` and ``validate_config`` run on it as verl runs them; only ``run_ppo`` (Ray,
the FSDP worker groups on GPUs, vLLM) is replaced by keeping the config.  Each launch passes
those checks as written (8 GPUs, two nodes, 7B, async) and scaled down by
``tests.launch_docs.verl_cpu_scale`` (sizes and devices only).  The scaled run then does what a
step does, in verl's code where verl's code runs on a CPU: the doc's data commands write the
training file and the Parquet rows from the launch's own agent file; verl's ``RLHFDataset``
loads them; verl's ``AgentLoopWorker`` runs the adapter's episodes (a scripted client stands in
for vLLM); verl's old-log-prob pass, GRPO advantage and ``compute_policy_loss_vanilla`` with
the config's loss aggregation, mini- and micro-batches and learning rate update a tiny Qwen2.

Not run here: verl's FSDP engine worker (verl 0.9.1 has no CPU platform: it falls back to
CUDA and ``init_device_mesh('cuda')`` fails), TransferQueue, Ray placement, vLLM, NCCL.

Runs in ``.venv-verl`` (``make test-verl``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

verl = pytest.importorskip("verl", reason="verl is not installed here; run `make test-verl`")
torch = pytest.importorskip("torch")

from tests.fixtures import verl_worker as vw  # noqa: E402
from tests.fixtures.scripted_server import HALLUCINATED, ScriptedServer  # noqa: E402
from tests.launch_docs import commands, verl_cpu_scale, with_overrides  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "trainers" / "verl" / "configs"


def launches() -> list[list[str]]:
    """The doc's ``main_ppo`` commands; ``$PWD`` is the repository, and the multi-node launch's
    shared ``/data/`` folder is the run folder's ``data/`` (a path, not a setting)."""
    return [[a.replace("$PWD", str(ROOT)).replace("=/data/", "=data/") for a in argv]
            for argv in commands("verl.md", "verl.trainer.main_ppo")]


def main_ppo(argv: list[str], run_dir: Path) -> Any:
    """verl's ``main_ppo.main`` on ``argv``, its config kept where ``run_ppo`` would start Ray."""
    import verl.trainer.main_ppo as mp

    kept: list[Any] = []
    old = (mp.run_ppo, sys.argv, os.environ.get("HYDRA_FULL_ERROR"))
    mp.run_ppo = lambda config, task_runner_class: kept.append((config, task_runner_class))
    sys.argv = ["main_ppo", *argv, f"hydra.run.dir={run_dir}", "hydra.output_subdir=null"]
    os.environ["HYDRA_FULL_ERROR"] = "1"  # verl's own exception, not Hydra's exit(1)
    try:
        mp.main()
    finally:
        mp.run_ppo, sys.argv = old[0], old[1]
        if old[2] is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
    (config, runner), = kept
    assert "TaskRunner" in str(runner)  # the Ray actor verl would start
    return config


def test_every_documented_launch_and_shipped_config_passes_main_ppos_checks(tmp_path):
    """As written: verl's ``validate_config`` (micro-batch sizes, batch divisibility by the
    GPUs) accepts each launch and each shipped config, the 8-GPU and two-node shapes included."""
    shapes = set()
    for argv in launches():  # scaled too: in the first-update tests below
        config = main_ppo(argv, tmp_path)
        shapes.add((config.trainer.nnodes, config.trainer.n_gpus_per_node))
    assert {(1, 1), (1, 8), (2, 8)} <= shapes
    for name in ("search_r1",):  # torl_math: the launches; verltool_math: its own test below
        main_ppo([f"--config-path={CONFIGS}", f"--config-name={name}",
                  "actor_rollout_ref.model.path=/models/x", "data.train_files=t.parquet",
                  "data.val_files=v.parquet", "trainer.n_gpus_per_node=8"], tmp_path)


def test_main_ppo_refuses_a_launch_without_micro_batch_sizes(tmp_path):
    """What the shipped configs lacked before issue 46: verl refuses the launch at its first
    check (the test above would fail the same way)."""
    argv = with_overrides(launches()[0],
                          ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null"])
    from hydra.errors import InstantiationException

    refused = (AssertionError, ValueError, InstantiationException)
    with pytest.raises(refused, match="micro_batch_size"):
        main_ppo(argv, tmp_path)
    argv = with_overrides(launches()[0],
                          ["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=null"])
    with pytest.raises(refused, match="log_prob_micro_batch_size"):
        main_ppo(argv, tmp_path)


# --------------------------------------------------------------------------- the scaled runs
class TwoAnswers:
    """verl's LLM client contract answered by two scripted servers: the first episode of each
    prompt gets the right answer, the second a wrong one, so every GRPO group has a non-zero
    advantage (the test's policy; the adapter and verl's batch are the real ones)."""

    def __init__(self, right: ScriptedServer, wrong: ScriptedServer, eos: int):
        self.clients = [vw.ScriptedClient(right, eos), vw.ScriptedClient(wrong, eos)]
        self.by_request: dict[str, int] = {}
        self.seen: dict[tuple, int] = {}

    async def generate(self, request_id: str, *, prompt_ids: list[int], **kwargs: Any):
        if request_id not in self.by_request:
            key = tuple(prompt_ids)
            self.by_request[request_id] = self.seen.get(key, 0) % 2
            self.seen[key] = self.seen.get(key, 0) + 1
        client = self.clients[self.by_request[request_id]]
        return await client.generate(request_id, prompt_ids=prompt_ids, **kwargs)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, qwen_tok):
    """A run folder as the docs assume (verl starts in the repository root): ``trainers/`` (the
    agent files), a tiny Qwen2 with the policy's tokenizer, and the doc's own training file
    written by the doc's command (``--n 4``: the size scaled down)."""
    from tir_envs.trainers.common import training_data

    root = tmp_path_factory.mktemp("verl-launch")
    (root / "trainers").symlink_to(ROOT / "trainers")
    (root / "data").mkdir()
    model = vw.model_dir(root, qwen_tok)
    from transformers import AutoConfig, Qwen2ForCausalLM

    torch.manual_seed(0)
    Qwen2ForCausalLM(AutoConfig.from_pretrained(model)).save_pretrained(model)
    with contextlib.chdir(root):
        assert training_data.main(["math", "--n", "4", "--out", "data/math_train.jsonl"]) == 0
    tasks = [json.loads(line) for line in (root / "data/math_train.jsonl").read_text().splitlines()]
    return root, model, tasks, {}


def scaled(argv: list[str], model: Path, run_dir: Path) -> tuple[Any, Any]:
    """The launch through ``main_ppo`` as written, and scaled to the CPU run."""
    config = main_ppo(argv, run_dir)
    actor = config.actor_rollout_ref.actor
    return config, main_ppo(with_overrides(argv, [
        *verl_cpu_scale(config.data.train_batch_size, actor.ppo_mini_batch_size),
        f"actor_rollout_ref.model.path={model}"]), run_dir)


def rollout(config: Any, workspace, qwen_tok) -> Any:
    """The doc's dataset command on the launch's agent file, verl's loader, verl's worker."""
    from transformers import AutoTokenizer

    from tir_envs.trainers.verl import dataset
    from verl.protocol import DataProto

    root, model, tasks, loaded = workspace
    agent_file = config.actor_rollout_ref.rollout.agent.agent_loop_config_path
    train = config.data.train_files
    key = (agent_file, train, config.data.max_prompt_length)
    if key not in loaded:  # the same file and loader settings: written and loaded once
        assert dataset.main(["--env-config", agent_file, "--tokenizer", str(model),
                             "--out", train]) == 0
        loaded[key] = vw.batch_from_parquet(config, Path(train),
                                            AutoTokenizer.from_pretrained(model))
    right = ScriptedServer(qwen_tok, {t["question"]: [
        f"```python\nprint({t['answer']})\n```\n```output" + HALLUCINATED,
        f"$\\boxed{{{t['answer']}}}$<|im_end|>"] for t in tasks})
    wrong = ScriptedServer(qwen_tok, {t["question"]: [
        f"```python\nprint({t['answer']}1)\n```\n```output" + HALLUCINATED,
        f"$\\boxed{{{t['answer']}1}}$<|im_end|>"] for t in tasks})
    batch = loaded[key]
    n, prompts = config.actor_rollout_ref.rollout.n, config.data.train_batch_size
    batch = DataProto.concat([batch[i:i + 1] for i in range(prompts)])
    batch = batch.repeat(repeat_times=n, interleave=True)  # as verl's trainer samples a group
    return vw.generate(config, TwoAnswers(right, wrong, qwen_tok.eos_token_id), batch)


def first_update(config: Any, output: Any) -> dict[str, Any]:
    """verl's update on the batch: old log-probs in the rollout's micro-batches, GRPO advantage,
    then for each mini-batch (``ppo_mini_batch_size`` prompts x ``n``) gradient accumulation
    over ``ppo_micro_batch_size_per_gpu`` rows of ``compute_policy_loss_vanilla`` with the
    config's ``loss_agg_mode``, one AdamW step at the config's learning rate."""
    from transformers import Qwen2ForCausalLM

    from verl.trainer.ppo.core_algos import (compute_grpo_outcome_advantage,
                                             compute_policy_loss_vanilla)
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.torch_functional import logprobs_from_logits

    cfg = config.actor_rollout_ref
    b, n = output.batch, cfg.rollout.n
    used = b["attention_mask"].sum(0).nonzero().flatten()  # padding every row shares: off
    first, keep = int(used.min()), int(used.max()) + 1
    width = b["prompts"].shape[1] - first
    ids, attn, pos = (b[k][:, first:keep] for k in ("input_ids", "attention_mask", "position_ids"))
    responses, mask = (b[k][:, :keep - first - width] for k in ("responses", "response_mask"))
    torch.manual_seed(0)
    model = Qwen2ForCausalLM.from_pretrained(cfg.model.path, dtype=torch.float32)
    before = [p.detach().clone() for p in model.parameters()]

    def log_prob(rows: slice) -> torch.Tensor:  # the LM head on the response positions only
        hidden = model.model(input_ids=ids[rows], attention_mask=attn[rows],
                             position_ids=pos[rows]).last_hidden_state
        return logprobs_from_logits(model.lm_head(hidden[:, width - 1:-1]), responses[rows])

    with torch.no_grad():
        step = cfg.rollout.log_prob_micro_batch_size_per_gpu
        old = torch.cat([log_prob(slice(i, i + step)) for i in range(0, len(ids), step)])
    uid = np.array([str(i // n) for i in range(len(ids))], dtype=object)
    scores = b["rm_scores"][:, :mask.shape[1]]
    advantages, _ = compute_grpo_outcome_advantage(scores, mask, uid)
    actor = omega_conf_to_dataclass(cfg.actor)
    optim = torch.optim.AdamW(model.parameters(), lr=cfg.actor.optim.lr,
                              weight_decay=cfg.actor.optim.weight_decay)
    mini, micro = cfg.actor.ppo_mini_batch_size * n, actor.ppo_micro_batch_size_per_gpu
    steps, losses = 0, []
    for start in range(0, len(ids), mini):
        optim.zero_grad()
        for m in range(start, start + mini, micro):
            rows = slice(m, m + micro)
            loss, _ = compute_policy_loss_vanilla(old[rows], log_prob(rows), advantages[rows],
                                                  mask[rows], loss_agg_mode=actor.loss_agg_mode,
                                                  config=actor)
            (loss * micro / mini).backward()
            losses.append(float(loss))
        optim.step()
        steps += 1
    moved = sum(not torch.equal(a, p.detach()) for a, p in zip(before, model.parameters()))
    return {"steps": steps, "losses": losses, "moved": moved, "advantages": advantages,
            "mask": mask}


@pytest.mark.parametrize("index", [0, *[pytest.param(i, marks=pytest.mark.full_launch)
                                        for i in range(1, 5)]])
def test_each_documented_launch_scaled_to_a_cpu_runs_to_a_first_update(index, workspace,
                                                                      qwen_tok, tmp_path):
    """``make test`` runs the first launch (8 GPUs, ToRL: two optimizer steps per batch) this
    way; the other four (1 GPU, 7B, two nodes, async) with ``-m full_launch`` (``make
    test-all``): 13, 28, 23 and 31 s on the 2-core machine at load 5 (94 s together, past the
    suite's budget; the first took 77 s in the same run).  All five pass ``main_ppo``'s checks above."""
    argv = launches()[index]
    root = workspace[0]
    with contextlib.chdir(root):
        as_written, config = scaled(argv, workspace[1], tmp_path)
        output = rollout(config, workspace, qwen_tok)
    update(config, output, as_written)


def update(config: Any, output: Any, as_written: Any) -> None:
    n, prompts = config.actor_rollout_ref.rollout.n, config.data.train_batch_size
    rewards = output.batch["rm_scores"].sum(-1).tolist()
    assert rewards == [1.0, -1.0] * prompts  # right then wrong in every group: the env graded
    assert output.non_tensor_batch["tir_tool_calls"][0] == {"tir/tool_calls/python": 1.0}
    result = first_update(config, output)
    # as many optimizer steps per batch as the launch as written takes (ToRL: 128 / 64 = 2)
    actor = as_written.actor_rollout_ref.actor
    assert result["steps"] == max(1, as_written.data.train_batch_size // actor.ppo_mini_batch_size)
    assert all(np.isfinite(result["losses"])) and len(result["losses"]) == n * prompts
    assert result["moved"] > 0  # the weights changed
    policy = result["mask"].bool()
    assert torch.all(result["advantages"][policy] != 0)


def test_verltool_math_scaled_to_a_cpu_runs_to_a_first_update(workspace, qwen_tok, tmp_path):
    """The VerlTool config (its own agent file: R_tool, 2048-token actions) the same way."""
    argv = [f"--config-path={CONFIGS}", "--config-name=verltool_math",
            "data.train_files=data/verltool.parquet", "data.val_files=data/val.parquet"]
    with contextlib.chdir(workspace[0]):
        as_written, config = scaled([*argv, "actor_rollout_ref.model.path=/m"], workspace[1],
                                    tmp_path)
        output = rollout(config, workspace, qwen_tok)
    update(config, output, as_written)
