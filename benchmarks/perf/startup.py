"""Start-up time of the command line: ``tir-envs --help``, ``tir-envs bench list`` and
``import tir_envs``, each in a fresh process, against a bare ``python -c pass`` run side by side
(the machine's load moves every figure; the difference to the bare interpreter is what the
project adds).  Goal: ``--help`` and ``bench list`` under 0.3 s on an idle machine.

The first episode (issue 47): ``tir-envs rollout`` of one ``tir/MathCode-v0`` episode whose
first action runs Python (so the time includes the first tool result), from a cold process,
against the same bare interpreter and against building the env alone (``make`` + ``reset``:
the tokenizer and tasks, no sandbox).  Both with the prepared tokenizer in its cache (every
start after the first), and the rollout once more with an empty cache
(``first episode, empty cache``: a fresh machine's first call builds and stores it).

``--baseline-tree PATH`` also times another checkout of the project (e.g. the commit before a
change) in the same alternation, so the two can be compared on the same load.  Runs alternate
command by command, ``REPEATS`` rounds; medians are printed as JSON with the load average.
``PERF_QUICK=1`` does 2 rounds, and one first episode against the bare interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK, pick  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REPEATS = pick(9, 2)
EPISODE_REPEATS = pick(5, 1)
ACTIONS = ["```python\nprint(6*7)\n```\n```output", "The answer is \\boxed{42}."]
TASKS = [{"id": "t0", "question": "What is 6*7?", "answer": "42"}]
_ROLLOUT = ("import sys; from tir_envs.cli import main; sys.exit(main(['rollout', '--env', "
            "'tir/MathCode-v0', '--tasks', {tasks!r}, '--policy', 'scripted:' + {actions!r}, "
            "'--out', {out!r}, '--no-progress']))")
QUICK_EPISODE = ("python -c pass", "first episode (rollout CLI)")
EPISODE_COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "build the env (make + reset)": ["-c", "import tir_envs; env = tir_envs.make("
                                           "'tir/MathCode-v0'); env.reset(seed=0)"],
    "first episode (rollout CLI)": "rollout",
    "first episode, empty cache": "rollout-empty-cache",
}
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "import tir_envs": ["-c", "import tir_envs"],
    "tir-envs --help": ["-c", "import sys; from tir_envs.cli import main; "
                              "sys.argv = ['tir-envs', '--help']; main()"],
    "tir-envs bench list": ["-c", "import sys; from tir_envs.cli import main; "
                                  "sys.exit(main(['bench', 'list']))"],
}


def timed(tree: Path, argv: list[str], extra_env: dict[str, str] | None = None) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree), **(extra_env or {})}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], env=env, cwd=tree, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{argv}: exit {done.returncode}: {done.stderr.decode()[-2000:]}")
    return time.perf_counter() - started


def episode_argv(kind: str, scratch: Path) -> tuple[list[str], dict[str, str]]:
    """The command line of a first-episode measurement and its extra environment."""
    if not isinstance(kind, str) or not kind.startswith("rollout"):
        return kind, {}
    out = scratch / f"traj-{time.monotonic_ns()}.jsonl"
    code = _ROLLOUT.format(tasks=str(scratch / "tasks.jsonl"),
                           actions=str(scratch / "actions.json"), out=str(out))
    extra = {}
    if kind.endswith("empty-cache"):
        cache = tempfile.mkdtemp(prefix="cache-", dir=scratch)
        extra["TIR_ENVS_CACHE"] = cache
    return ["-c", code], extra


def first_episode(trees: dict[str, Path]) -> dict:
    """Medians of ``EPISODE_COMMANDS`` per tree, alternating, with the load."""
    scratch = Path(tempfile.mkdtemp(prefix="startup-"))
    (scratch / "actions.json").write_text(json.dumps(ACTIONS))
    (scratch / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    commands = EPISODE_COMMANDS if not QUICK else {  # quick: the script runs, one episode
        c: k for c, k in EPISODE_COMMANDS.items() if c in QUICK_EPISODE}
    if not QUICK:
        for path in trees.values():  # the prepared tokenizer in the cache, as after a first run
            timed(path, *episode_argv("rollout", scratch))
    times = {t: {c: [] for c in commands} for t in trees}
    load_before = round(os.getloadavg()[0], 2)
    for _ in range(EPISODE_REPEATS):
        for name, kind in commands.items():
            for tree, path in trees.items():
                times[tree][name].append(timed(path, *episode_argv(kind, scratch)))
    shutil.rmtree(scratch, ignore_errors=True)
    medians = {t: {c: round(statistics.median(v), 3) for c, v in cs.items()}
               for t, cs in times.items()}
    return {"repeats": EPISODE_REPEATS, "load_avg_1m_before": load_before,
            "median_s": medians,
            "over_bare_python_s": {t: {c: round(v - m["python -c pass"], 3) for c, v in m.items()
                                       if c != "python -c pass"} for t, m in medians.items()},
            "episode_over_env_build_s": {t: round(m["first episode (rollout CLI)"]
                                                  - m["build the env (make + reset)"], 3)
                                         for t, m in medians.items()
                                         if "build the env (make + reset)" in m},
            "load_avg_1m_after": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-tree", type=Path, help="another checkout to time alongside")
    parser.add_argument("--no-episode", action="store_true",
                        help="only the command-line start-up, not the first episode")
    args = parser.parse_args()
    trees = {"this": ROOT, **({"baseline": args.baseline_tree} if args.baseline_tree else {})}
    times: dict[str, dict[str, list[float]]] = {t: {c: [] for c in COMMANDS} for t in trees}
    load_before = round(os.getloadavg()[0], 2)
    for _ in range(REPEATS):
        for name, argv in COMMANDS.items():
            for tree, path in trees.items():
                times[tree][name].append(timed(path, argv))
    out = {"repeats": REPEATS, "load_avg_1m_before": load_before,
           "median_s": {t: {c: round(statistics.median(v), 3) for c, v in cs.items()}
                        for t, cs in times.items()},
           "over_bare_python_s": {t: {c: round(statistics.median(v) - statistics.median(
               cs["python -c pass"]), 3) for c, v in cs.items() if c != "python -c pass"}
               for t, cs in times.items()},
           "load_avg_1m_after": round(os.getloadavg()[0], 2)}
    if not args.no_episode:
        out["first_episode"] = first_episode(trees)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
