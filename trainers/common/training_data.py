"""``python -m tir_envs.trainers.common.training_data``: write a training task file, never an eval set.

Every task set shipped for ``tir-envs bench`` is an evaluation set, so the adapters' examples
train on a file this command writes:

* ``math``: generated problems (``tir_envs.data.math.synthetic``: exact answers, disjoint from
  every shipped benchmark by construction). A **stand-in** that runs offline; the papers trained
  on their own sets (ToRL: LIMR; ZeroTIR / RITE: their math mixes), which ``convert`` writes.
* ``convert``: any ``.jsonl`` / ``.parquet`` file or Hugging Face dataset name (read on your
  machine with ``datasets``) to ``{"id", "question", "answer"}`` lines, naming the fields.

Either way the file is checked against the evaluation suites (``eval_guard``) before it is
written, and the command refuses a file that holds evaluation questions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from tir_envs.trainers.common.eval_guard import EvalOverlapError, check_training_tasks


def synthetic_math(n: int, seed: int) -> list[dict[str, Any]]:
    from tir_envs.data.math.synthetic import generate_math_tasks

    return [{"id": t.id, "question": t.question, "answer": t.answer}
            for t in generate_math_tasks(n, seed=seed)]


def converted(source: str, split: str, question: str, answer: str) -> list[dict[str, Any]]:
    """``{"id", "question", "answer"}`` from any records, the fields named by the caller."""
    from tir_envs.data.loaders import read_records

    out = []
    for i, rec in enumerate(read_records(source, required=(question, answer), split=split)):
        out.append({"id": str(rec.get("id", f"{Path(str(source)).stem}/{i}")),
                    "question": rec[question], "answer": str(rec[answer])})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tir_envs.trainers.common.training_data",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="kind", required=True)
    m = sub.add_parser("math", help="generated math problems (an offline stand-in)")
    m.add_argument("--n", type=int, default=20000, help="how many problems (default 20000)")
    m.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("convert", help="a file or hub dataset to a training JSONL")
    c.add_argument("source", help=".jsonl/.parquet path or a Hugging Face dataset name")
    c.add_argument("--split", default="train")
    c.add_argument("--question-field", default="question")
    c.add_argument("--answer-field", default="answer")
    for p in (m, c):
        p.add_argument("--out", required=True, help="the JSONL to write")
    args = parser.parse_args(argv)
    rows = (synthetic_math(args.n, args.seed) if args.kind == "math" else
            converted(args.source, args.split, args.question_field, args.answer_field))
    try:
        check_training_tasks(rows, args.out, strict=True)
    except EvalOverlapError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    Path(args.out).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                              encoding="utf-8")
    print(f"wrote {len(rows)} training tasks to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
