"""docs/trl.md's launches with two training ranks, each started by ``accelerate launch`` (issue 46).

The FSDP launch runs as written (its accelerate config file, ``python -m tir_envs.trainers.trl.train``),
scaled down by ``tests.launch_docs.trl_cpu_scale``, through one GRPO update on two gloo ranks:
the model is ``tests.fixtures.answer_model`` (right or wrong with even odds, so the group's
advantages are not all zero), and TRL's own table of the step's completions shows every rank's
episodes graded and weighted.

Server mode: TRL makes ``vllm_client`` on the main process only, and the rollout function runs
on every rank.  Two processes (``accelerate launch``, gloo on CPU, a real ``Accelerator``) run
the adapter's rollout function on their own prompts: rank 1 never touches a client, its
episodes' generations go to rank 0 in rounds and come back, and every rank's episodes end
graded, none failed.  The ranks are out of step on purpose (rank 0's
episodes answer in one turn, rank 1's call the tool first), so rank 0 keeps joining rounds
after its own episodes end.  Stand-in: the vLLM server (a scripted ``VLLMClient.generate``).

Runs in ``.venv-trl`` (``make test-trl``)."""

from __future__ import annotations

import ast
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="TRL is not installed here; run `make test-trl`")
pytest.importorskip("accelerate")

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accelerate_launch(argv: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    """``accelerate launch ARGV`` (accelerate's own CLI, run by this venv's python) on a free
    port.  Without ``--cpu`` accelerate starts the ranks through ``torch.distributed.run`` and
    each picks gloo on a machine without CUDA; ``--cpu`` would take its one-process launcher,
    which starts several CPU processes only through ``mpirun``."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch",
           "--main_process_port", str(free_port()), *argv]
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "300", "TRL_EXPERIMENTAL_SILENCE": "1"}
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_every_rank_trains_its_episodes_through_the_main_process_client(tmp_path):
    proc = accelerate_launch(["--multi_gpu", "--num_processes", "2", "--mixed_precision", "no",
                              "-m", "tests.fixtures.trl_ranks", str(tmp_path)])
    assert proc.returncode == 0, proc.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for rank in ranks:  # every rank's episodes are graded episodes, none failed
        assert rank["env_reward"] == [1.0, 1.0] and rank["infra_failed"] == [0.0, 0.0], rank
    assert all(c.startswith("```python") and c.endswith("$\\boxed{42}$<|im_end|>")
               for c in ranks[1]["completion"])  # rank 1 ran the tool: two turns, via rank 0
    sent = ranks[0]["client_prompts"]
    assert ranks[1]["client_prompts"] is None  # rank 1 has no client, as under TRL
    assert sum("3^2" in p for p in sent) == 2  # rank 0's two episodes, one turn each
    assert sum("6 \\times 7" in p for p in sent) == 4  # rank 1's two episodes, two turns each


def completions_table(stdout: str) -> list[tuple[str, float, float]]:
    """The rows (completion, env reward, advantage) of TRL's first printed completions table."""
    assert "Step 1" in stdout, "TRL printed no completions table (its log_completions uses rich)"
    table = stdout[stdout.index("Step 1"):]
    table = table[:table.index("╰")]
    rows = re.findall(r"│ │ \S+ +│ (.+?) +│ +(\S+) │ +(\S+) │ │", table)
    return [(c, float(r), float(a)) for c, r, a in rows]


def test_the_fsdp_launch_trains_every_ranks_episodes_in_one_update(tmp_path):
    from tests.fixtures.answer_model import completion_tokens, save_answer_model
    from tests.fixtures.tiny import tiny_tokenizer
    from tests.launch_docs import TRL_CPU_BATCH, full_commands, trl_cpu_scale
    from tir_envs.trainers.common.training_data import main as training_data
    from tir_envs.trainers.trl.dataset import main as write_dataset

    tok = tiny_tokenizer()
    model = save_answer_model(tok, tmp_path / "model")
    tasks, data = tmp_path / "math_train.jsonl", tmp_path / "train.jsonl"
    assert training_data(["math", "--n", "4", "--out", str(tasks)]) == 0
    assert [json.loads(x)["answer"] for x in tasks.read_text().splitlines()][:2] == ["16", "16"]
    assert write_dataset(["--env", "tir/MathCode-v0", "--tasks", str(tasks), "--limit", "2",
                          "--out", str(data)]) == 0  # the two tasks whose answer is 16
    (doc,) = [c for c in full_commands("trl.md", "tir_envs.trainers.trl.train")
              if "trainers/trl/accelerate/fsdp.yaml" in c]
    argv = trl_cpu_scale(doc, str(model), str(data), str(tasks))
    assert argv[:2] == ["accelerate", "launch"]
    proc = accelerate_launch(argv[2:])
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = completions_table(proc.stdout)  # gathered from both ranks by TRL on the main process
    assert len(rows) == 2 * TRL_CPU_BATCH, proc.stdout[-4000:]
    assert {c for c, _, _ in rows} == {"\\boxed{16}", "\\boxed{17}"}, rows  # one group, mixed
    for completion, reward, advantage in rows:  # every episode graded and weighted, none failed
        assert reward == (1.0 if completion == "\\boxed{16}" else -1.0)
        assert advantage != 0 and (advantage > 0) == (reward > 0)
    (metrics,) = [ast.literal_eval(m) for m in re.findall(r"\{'loss'.*?\}", proc.stdout)][:1]
    assert float(metrics["grad_norm"]) > 0  # the update moved the weights
    assert float(metrics["completions/mean_length"]) == completion_tokens(tok)
