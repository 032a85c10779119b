"""``bench --ray``: a benchmark's episodes on a local Ray cluster of two worker processes,
the policy served by two local OpenAI-compatible servers; the driver's run folder ends equal
to a single-process run's, sample for sample, and a local run resumes on Ray."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("aiohttp")

from tir_envs.bench import run  # noqa: E402
from tir_envs.bench.store import RunStore  # noqa: E402
from tests.fixtures.completions_server import SeededServer  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SETTINGS = dict(k=2, limit=6, model="seeded", concurrency=8, progress=False)
TIMING = ("wall_s", "tool_latency_s")
TOOL_TIMING = ("latency_s", "duration_s", "cpu_s")  # what the sandbox measured of each call


@pytest.fixture(scope="module")
def cluster():
    # address="local": a new instance of our own, never another process's cluster
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def servers():
    with SeededServer() as one, SeededServer() as two:
        yield f"openai:{one.url},{two.url}", (one, two)


def _samples(folder: Path) -> dict[tuple[int, int], dict]:
    """Each record without what timing and placement decide (wall times, the worker)."""
    out = {}
    for r in RunStore(folder).suite_records("gsm8k"):
        traj = dict(r["trajectory"])
        traj["metadata"] = {k: v for k, v in traj["metadata"].items()
                            if k not in ("episode_s", "generate_s", "step_s", "worker")}
        traj["turns"] = [{**t, "tool_results": [{k: v for k, v in x.items() if k not in TOOL_TIMING}
                                                for x in t["tool_results"]]}
                         for t in traj["turns"]]
        out[r["item"], r["sample"]] = {**{k: v for k, v in r.items() if k not in TIMING},
                                       "trajectory": traj}
    return out


def _scores(folder: Path) -> dict:
    summary = json.loads((folder / "summary.json").read_text())
    part = dict(summary["suites"]["gsm8k"]["parts"]["gsm8k"])
    part.pop("cost")
    return {"part": part, "table": summary["autotir_table"]}


def test_a_ray_run_equals_the_single_process_run_sample_for_sample(cluster, servers, tmp_path):
    spec, (one, two) = servers
    run("gsm8k", spec, out=tmp_path / "local", **SETTINGS)
    before = one.requests + two.requests
    run("gsm8k", spec, out=tmp_path / "ray", ray=True, **SETTINGS)
    assert one.requests + two.requests - before == 24  # 12 samples x 2 turns, all from Ray
    local, remote = _samples(tmp_path / "local"), _samples(tmp_path / "ray")
    assert len(local) == 12 and remote == local
    assert all(r["tool_calls"] == 1 and r["answered"] for r in local.values())
    workers = {r["trajectory"]["metadata"]["worker"]
               for r in RunStore(tmp_path / "ray").suite_records("gsm8k")}
    assert len(workers) == 2  # both worker processes played episodes
    assert _scores(tmp_path / "ray") == _scores(tmp_path / "local")


def test_an_interrupted_local_run_resumes_on_ray_to_the_same_samples(cluster, servers, tmp_path,
                                                                     monkeypatch):
    from tir_envs.rollout.openai_compat import OpenAIPolicy

    spec, _ = servers
    run("gsm8k", spec, out=tmp_path / "local", **SETTINGS)
    added = {"n": 0}
    add = RunStore.add

    def counting(self, sink, record):
        added["n"] += 1
        return add(self, sink, record)

    generate = OpenAIPolicy.generate

    async def interrupted(self, prompt_ids, stop, sampling):
        if added["n"] >= 4:  # Ctrl-C once a few samples are saved
            raise KeyboardInterrupt
        return await generate(self, prompt_ids, stop, sampling)

    monkeypatch.setattr(RunStore, "add", counting)
    monkeypatch.setattr(OpenAIPolicy, "generate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run("gsm8k", spec, out=tmp_path / "cut", **SETTINGS)
    monkeypatch.setattr(OpenAIPolicy, "generate", generate)
    saved = RunStore(tmp_path / "cut").records
    assert 0 < len(saved) < 12
    run("gsm8k", spec, out=tmp_path / "cut", ray=True, **SETTINGS)
    assert _samples(tmp_path / "cut") == _samples(tmp_path / "local")
    assert _scores(tmp_path / "cut") == _scores(tmp_path / "local")
    lines = (tmp_path / "cut" / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 12  # the saved samples were not run again


def test_a_ray_run_takes_a_spec_string(tmp_path):
    from tir_envs.bench.oracle import oracle

    with pytest.raises(ValueError, match="pass a spec string"):
        run("gsm8k", oracle(), out=tmp_path / "x", ray=True, limit=1, progress=False)
    assert not (tmp_path / "x").exists()
