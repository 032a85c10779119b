"""Start-up time of the command line: ``tir-envs --help``, ``tir-envs bench list`` and
``import tir_envs``, each in a fresh process, against a bare ``python -c pass`` run side by side
(the machine's load moves every figure; the difference to the bare interpreter is what the
project adds).  Goal: ``--help`` and ``bench list`` under 0.3 s on an idle machine.

``--baseline-tree PATH`` also times another checkout of the project (e.g. the commit before a
change) in the same alternation, so the two can be compared on the same load.  Runs alternate
command by command, ``REPEATS`` rounds; medians are printed as JSON with the load average.
``PERF_QUICK=1`` does 2 rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.perf.quick import pick  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REPEATS = pick(9, 2)
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "import tir_envs": ["-c", "import tir_envs"],
    "tir-envs --help": ["-c", "import sys; from tir_envs.cli import main; "
                              "sys.argv = ['tir-envs', '--help']; main()"],
    "tir-envs bench list": ["-c", "import sys; from tir_envs.cli import main; "
                                  "sys.exit(main(['bench', 'list']))"],
}


def timed(tree: Path, argv: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    started = time.perf_counter()
    subprocess.run([sys.executable, *argv], env=env, cwd=tree, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-tree", type=Path, help="another checkout to time alongside")
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
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
