"""Every launch command the adapter docs show parses with the framework's own parser or config
schema (issue 35, item 1): OpenRLHF's ``train_ppo_ray`` argument parser and its checks, verl's
Hydra config (``ppo_trainer`` + the overrides), TRL's ``GRPOConfig`` and ``trl vllm-serve``'s
arguments, and accelerate's config files.  A flag renamed upstream, a typo, or a value the
framework's own validation refuses fails here, before anyone spends GPU hours on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launch_docs import DOCS, bash_blocks, commands

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------ OpenRLHF
def openrlhf_parse(argv: list[str]):
    """OpenRLHF's own ``__main__`` block (parser, ``hierarchize``, every check) on ``argv``, with
    ``train(args)`` replaced by capturing ``args`` (the module's imports need vLLM and CUDA)."""
    import openrlhf.cli as cli

    source = (Path(cli.__file__).parent / "train_ppo_ray.py").read_text()
    main = source[source.index('if __name__ == "__main__":'):]
    assert main.rstrip().endswith("train(args)"), "OpenRLHF's entry point changed shape"
    main = main.rstrip()[:-len("train(args)")] + "_captured.append(args)\n"
    scope = {"__name__": "__main__", "_captured": []}
    exec("import argparse, os\nfrom datetime import datetime\n", scope)
    old = sys.argv
    sys.argv = ["train_ppo_ray", *argv]
    try:
        exec(compile(main, "openrlhf/cli/train_ppo_ray.py", "exec"), scope)
    finally:
        sys.argv = old
    return scope["_captured"][0]


def openrlhf_launches() -> list[list[str]]:
    """The docs' launches; one that says ``...`` takes the rest from the one before it."""
    out: list[list[str]] = []
    for argv in commands("openrlhf.md", "openrlhf.cli.train_ppo_ray"):
        if "..." in argv:
            given = argv[:argv.index("...")]
            flags = {a for a in given if a.startswith("--")}
            base, rest, i = out[0], [], 0
            while i < len(base):
                j = i + 1
                while j < len(base) and not base[j].startswith("--"):
                    j += 1
                if base[i] not in flags:
                    rest += base[i:j]
                i = j
            argv = given + rest
        out.append(argv)
    return out


def test_openrlhf_launches_parse_with_openrlhfs_own_parser():
    pytest.importorskip("openrlhf")
    launches = openrlhf_launches()
    assert len(launches) >= 4  # 1 GPU, 8 GPUs, async, two nodes
    seen = set()
    for argv in launches:
        args = openrlhf_parse(argv)
        assert args.train.agent_func_path.endswith("trainers/openrlhf/agent.py")
        assert args.data.input_key == "prompt" and args.data.label_key == "label"
        gpus = args.actor.num_nodes * args.actor.num_gpus_per_node
        seen.add((gpus, args.actor.num_nodes, bool(args.train.async_enable)))
    assert {(1, 1, False), (8, 1, False), (16, 2, False)} <= seen
    assert any(async_ for *_, async_ in seen)


def test_every_ray_job_block_starts_its_cluster():
    """``ray job submit`` talks to a running cluster's dashboard: each block that submits one
    starts Ray first (``ray start --head``), so a block copied alone does not fail to connect."""
    for doc in ("openrlhf.md", "verl.md"):
        for block in bash_blocks(doc):
            if "ray job submit" in block:
                assert "ray start --head" in block.split("ray job submit")[0], (doc, block[:300])


def test_openrlhf_parser_refuses_a_typo():
    pytest.importorskip("openrlhf")
    argv = openrlhf_launches()[0] + ["--rollout.n_samples_per_promt", "8"]
    with pytest.raises(SystemExit):
        openrlhf_parse(argv)


# ------------------------------------------------------------------------------ pinned stacks
STACKS = {  # constraints file -> what its header says to install with it
    "openrlhf": ("trainers/openrlhf/constraints-gpu.txt",
                 [".[openrlhf]", "vllm", "deepspeed", "transformers", "ray[default]"]),
    "verl": ("trainers/verl/constraints-gpu.txt", [".[verl]", "vllm", "torch"]),
    "trl": ("trainers/trl/constraints-gpu.txt", [".[trl]", "vllm", "deepspeed", "accelerate"]),
}


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if "==" in line:
            name, version = line.split("==")
            pins[name.split("[")[0].lower().replace("_", "-")] = version
    return pins


#: resolutions younger than this are reused when nothing they were made from changed
RESOLUTION_TTL_S = 24 * 3600


def _resolution_cache() -> Path:
    """Where pip's resolution reports are kept between runs (``TIR_PIN_CACHE`` or the user's
    cache folder)."""
    base = os.environ.get("TIR_PIN_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tir-envs", "pins")
    return Path(base)


def _resolution_key(name: str, args: list[str]) -> str:
    """A hash of everything a resolution is made from: pip's arguments, the constraints file's
    bytes, pyproject.toml (the extras it requests), and the pip and Python that resolve."""
    import hashlib
    import platform
    from importlib.metadata import version

    h = hashlib.sha256()
    for part in (name, json.dumps(args), (ROOT / STACKS[name][0]).read_text(),
                 (ROOT / "pyproject.toml").read_text(), version("pip"), platform.python_version()):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:32]


def _resolve_stacks(tmp_path: Path) -> dict[str, dict]:
    """Each stack's pip report: pip's resolver runs for every stack (all at once) unless a report
    made from the same inputs within ``RESOLUTION_TTL_S`` is kept (``TIR_PIN_RESOLVE=fresh``
    always resolves).  Why a cache: a resolution is a few hundred metadata requests to PyPI,
    2 to 14 minutes here, and the same inputs resolve the same way unless PyPI changes under
    them, which the day's limit bounds."""
    import time

    cache, fresh = _resolution_cache(), os.environ.get("TIR_PIN_RESOLVE") == "fresh"
    procs, reports = {}, {}
    for name, (constraints, wanted) in STACKS.items():
        report = tmp_path / name
        args = ["-c", str(ROOT / constraints), *[str(ROOT) + w[1:] if w.startswith(".") else w
                                                 for w in wanted]]
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
               "--quiet", "--disable-pip-version-check", "--report", str(report), *args]
        kept = cache / f"{name}-{_resolution_key(name, args)}.json"
        if not fresh and kept.exists() and time.time() - kept.stat().st_mtime < RESOLUTION_TTL_S:
            reports[name] = json.loads(kept.read_text())
            continue
        procs[name] = (subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, cwd=tmp_path), report, kept)
    for name, (proc, report, kept) in procs.items():
        _, err = proc.communicate(timeout=1800)
        assert proc.returncode == 0, f"{name}: {err[-3000:]}"
        reports[name] = json.loads(report.read_text())
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(reports[name]))
    return reports


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a cold resolution took 14 minutes on the loaded 2-core machine
def test_each_adapters_pinned_gpu_stack_resolves_together(tmp_path):
    """pip resolves each constraints file with what its header installs, in a fresh resolution
    (``--dry-run --ignore-installed --report``: pip reads each wheel's metadata, PyPI serving it
    apart from the wheel (PEP 658), so no CUDA wheel is downloaded; minutes on a slow machine,
    so a report from the same inputs within a day is reused, see ``_resolve_stacks``):
    the versions the docs pin can be installed together, pip picks exactly the pinned ones,
    and the transformers it picks is the one the adapter's tests run on.  flash-attn (an sdist that needs torch to
    build) and the frameworks installed ``--no-deps`` are constraints, not requested."""
    for name, report in _resolve_stacks(tmp_path).items():
        got = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
               for i in report["install"]}
        for pkg, version in _pins(ROOT / STACKS[name][0]).items():
            if pkg in got:
                assert got[pkg].split("+")[0] == version, (name, pkg, got[pkg])
        frameworks = {"openrlhf": "vllm", "verl": "verl", "trl": "trl"}
        assert frameworks[name] in got, name
        # the adapter's tests run on the transformers this stack resolves to: the adapter's
        # extra (the test venv's pins, Makefile) admits exactly that version
        tested = TESTED_TRANSFORMERS.get(name)
        if tested is not None:
            assert got["transformers"] in tested, (name, got["transformers"], str(tested))


def _extra_transformers(extra: str):
    """The transformers specifier the ``extra`` of pyproject.toml pins (the adapter's test venv
    is built from it)."""
    import tomllib

    from packaging.requirements import Requirement

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for dep in deps[extra]:
        req = Requirement(dep)
        if req.name == "transformers":
            return req.specifier
    return None


TESTED_TRANSFORMERS = {name: _extra_transformers(name) for name in ("verl", "trl")}


def test_the_trl_stack_is_the_one_the_adapter_is_tested_on():
    """TRL's GPU pins and its test venv name one transformers: vLLM 0.31 (the top of TRL 1.16's
    range) needs < 5.18, so both pin 5.17.0 (issue 46: the pins resolved to 5.17 while the tests
    ran 5.24)."""
    gpu = _pins(ROOT / STACKS["trl"][0])
    assert str(TESTED_TRANSFORMERS["trl"]) == f"=={gpu['transformers']}"
    verl = _pins(ROOT / STACKS["verl"][0])["transformers"]
    assert verl in TESTED_TRANSFORMERS["verl"]
