"""The TRL adapter through TRL's own code: ``GRPOTrainer._generate_and_score_completions`` on the
parity episodes, ``GRPOTrainer.train()`` for two steps with a tiny Qwen2 generating through its
own ``generate``, and ``compute_loss``'s gradient on observation tokens.

Runs in ``.venv-trl`` (``make test-trl``); skipped where TRL is not installed.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

trl = pytest.importorskip("trl", reason="TRL is not installed here; run `make test-trl`")
torch = pytest.importorskip("torch")

from tests.fixtures.parity_cases import settings as parity_settings  # noqa: E402
from tests.fixtures.parity_ledger import ServerPolicy, direct_ledgers  # noqa: E402
from tests.fixtures.scripted_server import ScriptedServer  # noqa: E402
from tests.fixtures.trl_parity import GROUP, run as run_parity  # noqa: E402
from tests.fixtures.trl_parity import tiny_qwen2, trainer_for  # noqa: E402
from tests.sql_helpers import CACHE  # noqa: E402

TASKS = [{"id": "t/42", "question": "What is $6 \\times 7$?", "answer": "42"},
         {"id": "t/9", "question": "What is $3^2$?", "answer": "9"}]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("trl")


def test_every_setting_gives_the_env_ledger(root, qwen_tok):
    records = run_parity(root, str(CACHE))
    direct = {(r["setting"], r["case"]): r
              for r in direct_ledgers(parity_settings(str(root / "search"), str(CACHE)), qwen_tok)}
    assert len(records) == len(direct) * GROUP == 48
    for i, got in enumerate(records):
        want = direct[(got["setting"], got["case"])]
        where = f"{got['setting']}/{got['case']}#{got['copy']}"
        assert got["copy"] == i % GROUP  # the copies of an episode sit together, in order
        assert got["prompt_ids"] == want["prompt_ids"], where
        assert got["response_ids"] == want["response_ids"], where
        assert got["loss_mask"] == want["loss_mask"], where
        assert got["trainer_mask"] == want["loss_mask"], where  # completion mask x env mask
        assert got["logprobs"] == [float(np.float32(x)) for x in want["logprobs"]], where
        assert got["reward"] == want["reward"], where


def test_two_train_steps_with_the_models_own_generate(root, qwen_tok):
    """``GRPOTrainer.train()`` for two steps: a tiny random Qwen2 generates every action through
    ``HFPolicy`` (its own ``generate``), the env runs the episodes, TRL trains on the ledgers."""
    from tir_envs.trainers.trl.train import build_trainer

    model = tiny_qwen2(qwen_tok)
    trainer = build_trainer(
        "tir/MathCode-v0", {"protocol": "torl", "tasks": TASKS}, model, qwen_tok,
        ["t/42", "t/9"], output_dir=str(root / "train"), use_cpu=True, max_steps=2,
        num_generations=2, per_device_train_batch_size=4, max_completion_length=12,
        report_to=[], logging_steps=1, bf16=False, save_strategy="no", temperature=1.0)
    rollouts, batches = [], []
    inner = trainer.rollout_func
    trainer.rollout_func = lambda prompts, tr: rollouts.append(inner(prompts, tr)) or rollouts[-1]
    score = trainer._generate_and_score_completions
    trainer._generate_and_score_completions = lambda inputs: batches.append(score(inputs)) or \
        batches[-1]
    trainer.train()
    assert trainer.state.global_step == 2 and len(rollouts) >= 1
    for out, batch in zip(rollouts, batches):
        for i, ids in enumerate(out["completion_ids"]):
            n = len(ids)
            assert batch["completion_ids"][i, :n].tolist() == ids
            assert batch["tool_mask"][i, :n].tolist() == out["env_mask"][i]
            assert int(batch["completion_mask"][i].sum()) == n
            assert all(0 < len(a) <= 12 for a in _actions(out["env_mask"][i]))
        assert out["prompt_ids"][0] == out["prompt_ids"][1]  # a group: two episodes of a task
    assert all(r in (1.0, -1.0) for out in rollouts for r in out["env_reward"])
    logged = [h for h in trainer.state.log_history if "rewards/env_reward/mean" in h]
    assert len(logged) == 2
    assert all(np.isfinite(h["loss"]) for h in trainer.state.log_history if "loss" in h)


def _actions(mask):
    runs, start = [], None
    for i, m in enumerate(mask + [0]):
        if m and start is None:
            start = i
        if not m and start is not None:
            runs.append((start, i))
            start = None
    return [range(a, b) for a, b in runs]


def test_compute_loss_gives_zero_gradient_on_observation_tokens(root, qwen_tok):
    """TRL's own ``compute_loss`` over the adapter's batch: the gradient reaching the final hidden
    state at every position that predicts an observation token is exactly zero, and not where
    it predicts a policy token.  (TRL scores with a fused LM head, so logits never exist as a
    tensor; the final norm's output feeds the head position by position, so its gradient at a
    position is that position's token's gradient.)"""
    setting = parity_settings(str(root / "search"), str(CACHE))[0]  # torl
    policy = ServerPolicy(ScriptedServer(qwen_tok, setting.scripts), qwen_tok.eos_token_id)
    trainer = trainer_for(setting, root / "grad", qwen_tok, policy, [])
    inputs = [{"prompt": c.label} for c in setting.cases for _ in range(GROUP)]
    batch = trainer._generate_and_score_completions(inputs)
    # copies of one episode share a reward, so GRPO's own advantages are 0 here: give each row
    # a non-zero one (the masking, not the advantage, is what is measured)
    batch["advantages"] = torch.tensor([1.0, -1.0] * (len(inputs) // 2))
    trainer.current_gradient_accumulation_steps = 1  # what train() sets before compute_loss
    outputs = []

    def keep(module, args, out):  # returns None: the output stays as it is
        out.retain_grad()
        outputs.append(out)

    hook = trainer.model.model.norm.register_forward_hook(keep)
    loss = trainer.compute_loss(trainer.model, batch)
    hook.remove()
    loss.backward()
    (hidden,) = outputs
    width = batch["completion_ids"].shape[1]
    grad = hidden.grad[:, -width - 1:-1].abs().sum(-1)  # the positions predicting completion
    real = batch["completion_mask"].bool()
    env = batch["tool_mask"].bool()
    observation, action = real & ~env, real & env
    assert observation.any() and action.any()
    assert torch.all(grad[observation] == 0)
    assert torch.all(grad[action] > 0)


class FakeVLLMClient:
    """``VLLMClient.generate``'s documented contract (token-id prompts in; ``completion_ids``
    and per-token ``logprobs`` lists out) answered by a scripted server."""

    def __init__(self, server, eos):
        self.server, self.eos, self.calls = server, eos, []

    def generate(self, prompts, n, temperature, top_p, top_k, max_tokens, logprobs,
                 generation_kwargs):
        self.calls.append({"n": n, "max_tokens": max_tokens, **generation_kwargs})
        outs = [self.server.complete(p, generation_kwargs["stop"], max_tokens, self.eos)
                for p in prompts]
        return {"prompt_ids": prompts, "completion_ids": [o.token_ids for o in outs],
                "logprobs": [[[lp] for lp in o.logprobs] for o in outs]}


def test_the_vllm_server_path_gives_the_env_ledger(root, qwen_tok):
    from tir_envs.trainers.trl.rollout import make_rollout_func

    setting = parity_settings(str(root / "search"), str(CACHE))[1]  # zerotir: stops change
    client = FakeVLLMClient(ScriptedServer(qwen_tok, setting.scripts), qwen_tok.eos_token_id)
    trainer = SimpleNamespace(
        processing_class=qwen_tok, vllm_generation=SimpleNamespace(mode="server",
                                                                   vllm_client=client),
        args=SimpleNamespace(max_completion_length=1024, temperature=1.0, top_p=1.0, top_k=0))
    out = make_rollout_func(setting.env_id, generate="vllm", **setting.env_kwargs)(
        [c.label for c in setting.cases], trainer)
    direct = direct_ledgers([setting], qwen_tok)
    assert out["completion_ids"] == [d["response_ids"] for d in direct]
    assert out["env_mask"] == [d["loss_mask"] for d in direct]
    assert out["logprobs"] == [d["logprobs"] for d in direct]
    assert out["env_reward"] == [d["reward"] for d in direct]
    assert {tuple(c["stop"]) for c in client.calls} == {("```python",), ("```",)}
    assert all(c["include_stop_str_in_output"] is True for c in client.calls)


def test_vllm_without_trls_vllm_says_how_to_turn_it_on(qwen_tok):
    from tir_envs.trainers.trl.vllm import TRLVLLMPolicy

    with pytest.raises(ValueError, match="use_vllm=True"):
        TRLVLLMPolicy(SimpleNamespace(), qwen_tok)


def test_bad_arguments_are_named():
    from tir_envs.trainers.common.env_config import ConfigError
    from tir_envs.trainers.trl.rollout import make_rollout_func

    with pytest.raises(ValueError, match="generate must be one of"):
        make_rollout_func("tir/MathCode-v0", generate="sglang")
    with pytest.raises(ConfigError, match="registered ids"):
        make_rollout_func("tir/Nope-v0")


def test_an_unsupported_trl_version_is_named(monkeypatch):
    from importlib import metadata

    from tir_envs.trainers.common.versions import UnsupportedVersion, require

    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda d: "0.19.0" if d == "trl" else real(d))
    with pytest.raises(UnsupportedVersion, match=r"trl 0\.19\.0 is not supported .*1\.16\.0"):
        require("trl", ("1.16.0",), "trl")


def test_the_dataset_writer_puts_labels_in_the_prompt_column(tmp_path):
    from tir_envs.trainers.trl.dataset import main

    out = tmp_path / "d.jsonl"
    assert main(["--env", "tir/MathCode-v0", "--tasks", "math500", "--limit", "2",
                 "--out", str(out)]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [set(r) for r in rows] == [{"prompt"}] * 2
    assert rows[0]["prompt"].startswith("math500/")


def test_failed_and_empty_episodes_reach_trl_flagged():
    """An infra-failed episode's reward is None (TRL leaves it out of the group baseline, with
    advantage 0); an episode with no token after the prompt gets one masked pad token (TRL
    indexes every completion's last token)."""
    from tir_envs.trajectory import EpisodeFailure, Trajectory
    from tir_envs.trainers.trl.rollout import to_trl

    failed = Trajectory(prompt_ids=[1, 2], task_id="a", env_id="tir/MathCode-v0")
    failed.append([5, 6], policy=True, logprobs=[-0.1, -0.2])
    failed.append([7], policy=False)
    failed.fail(EpisodeFailure("infra", "sandbox worker died"))
    empty = Trajectory(prompt_ids=[1, 2], task_id="b", env_id="tir/MathCode-v0",
                       terminated=True, reward=-1.0)
    out = to_trl([failed, empty], pad_token_id=0)
    assert out["completion_ids"] == [[5, 6, 7], [0]]
    assert out["env_mask"] == [[1, 1, 0], [0]]
    assert out["logprobs"] == [[-0.1, -0.2, 0.0], [0.0]]
    assert out["env_reward"] == [None, -1.0]
    assert out["tir_infra_failed"] == [1.0, 0.0] and out["tir_empty"] == [0.0, 1.0]
    assert out["tir_unfinished"] == [1.0, 0.0]


def test_the_example_script_runs_on_a_cpu_with_its_own_defaults(tmp_path, qwen_tok):
    """``python -m tir_envs.trainers.trl.train`` as the docs show it, on a CPU, with no ``--grpo``
    precision flags: the script picks bf16 off and ``use_cpu`` itself (TRL's bf16 default is
    refused on a CPU), and trains on a training file."""
    from tir_envs.trainers.common.training_data import main as training_data
    from tir_envs.trainers.trl.dataset import main as write_dataset
    from tir_envs.trainers.trl.train import main as train, model_dtype

    model = tmp_path / "model"
    tiny_qwen2(qwen_tok).save_pretrained(model)
    qwen_tok.save_pretrained(model)
    tasks, data = tmp_path / "math_train.jsonl", tmp_path / "train.jsonl"
    assert training_data(["math", "--n", "4", "--out", str(tasks)]) == 0
    assert write_dataset(["--env", "tir/MathCode-v0", "--tasks", str(tasks),
                          "--out", str(data)]) == 0
    grpo = {"per_device_train_batch_size": 2, "max_completion_length": 8, "report_to": [],
            "save_strategy": "no", "logging_steps": 1}
    assert train(["--env", "tir/MathCode-v0", "--env-kwargs",
                  json.dumps({"protocol": "torl", "tasks": str(tasks)}), "--model", str(model),
                  "--data", str(data), "--steps", "1", "--num-generations", "2",
                  "--output-dir", str(tmp_path / "run"), "--grpo", json.dumps(grpo)]) == 0
    assert model_dtype({"bf16": True}) == torch.bfloat16
    assert model_dtype({"bf16": False}) == torch.float32


def test_every_documented_launch_parses_with_each_tools_own_parser():
    """docs/trl.md's GPU launches: ``accelerate launch`` through accelerate's own parser and
    config loader (ZeRO-3 and FSDP files), the script's flags through its parser, the GRPO
    fields through TRL's ``GRPOConfig`` (on a GPU machine's precision), and ``trl vllm-serve``
    through TRL's own parser."""
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import launch_command_parser
    from trl import GRPOConfig
    from trl.scripts.vllm_serve import make_parser

    from tests.launch_docs import full_commands
    from tir_envs.trainers.trl.train import build_parser, grpo_settings

    modes, distributed = set(), set()
    for argv in full_commands("trl.md", "tir_envs.trainers.trl.train"):
        argv = [a for a in argv if "=" not in a.split("-")[0] or a.startswith("-")]
        if argv[:2] == ["accelerate", "launch"]:
            launch = launch_command_parser().parse_args(argv[2:])
            assert launch.module and launch.training_script == "tir_envs.trainers.trl.train"
            accel = load_config_from_file(launch.config_file)
            distributed.add(accel.distributed_type.value)
            script, processes = launch.training_script_args, accel.num_processes
        else:
            script, processes = argv[argv.index("tir_envs.trainers.trl.train") + 1:], 1
        args = build_parser().parse_args(script)
        assert json.loads(args.env_kwargs)["tasks"].endswith("math_train.jsonl")
        grpo = {**grpo_settings(args), "bf16": True}  # as on the GPU machine it is written for
        # one process here stands for `processes`: the same global batch, so TRL's own checks
        # (generation batch divisible by num_generations, ...) see what the launch will
        per_device = grpo.get("per_device_train_batch_size", 8) * processes
        config = GRPOConfig(**{**grpo, "output_dir": "/tmp/x", "use_cpu": True, "bf16": False,
                               "per_device_train_batch_size": per_device})
        assert config.use_vllm and config.vllm_mode == grpo.get("vllm_mode", "colocate")
        modes.add(config.vllm_mode)
    assert modes == {"server", "colocate"} and {"DEEPSPEED", "FSDP"} <= distributed
    (serve,) = full_commands("trl.md", "vllm-serve")
    serve = [a for a in serve if a != "&"]
    (serve_args,) = make_parser().parse_args_into_dataclasses(serve[serve.index("vllm-serve") + 1:])
    assert serve_args.model == "Qwen/Qwen2.5-Math-7B"
