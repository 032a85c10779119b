"""TRL's server mode with two training ranks (issue 46): TRL makes ``vllm_client`` on the main
process only, and the rollout function runs on every rank.  Two processes (``torchrun``, gloo
on CPU, a real ``Accelerator``) run the adapter's rollout function on their own prompts: rank 1
never touches a client, its episodes' generations go to rank 0 in rounds and come back, and
every rank's episodes end graded, none failed.  The ranks are out of step on purpose (rank 0's
episodes answer in one turn, rank 1's call the tool first), so rank 0 keeps joining rounds
after its own episodes end.  Stand-in: the vLLM server (a scripted ``VLLMClient.generate``).

Runs in ``.venv-trl`` (``make test-trl``)."""

from __future__ import annotations

import json
import os
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


def test_every_rank_trains_its_episodes_through_the_main_process_client(tmp_path):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
           "-m", "tests.fixtures.trl_ranks", str(tmp_path)]
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
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
