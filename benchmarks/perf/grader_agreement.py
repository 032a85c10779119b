"""Agreement of this project's grader with Math-Verify's own test suite.

Usage: ``python benchmarks/perf/grader_agreement.py PATH/TO/Math-Verify/tests [--details]``
(a checkout of github.com/huggingface/Math-Verify; nothing of it ships with this project).

Reads every ``(gold, pred, expected)`` case of the suite's ``pytest.mark.parametrize`` tables
(literal values only; cases built with code, such as f-strings, are counted as skipped) and
grades it the way an evaluation suite of this project would: the answer is found in ``pred``
with ``extract_final_answer(pred, fallback=True)`` (a short one-line ``pred`` with nothing to
extract is taken as a bare answer, as an ``answer`` tool would pass it); the gold likewise, its
boxes joined as a list when it has several.  Per-case options of the suite (``precision``,
``match_types``, ``allow_set_relation_comp``, ``strict``) are ignored: the grader has one rule.
Prints JSON: counts, agreement, and every disagreement.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import QUICK, pick  # noqa: E402

from tir_envs.answers.math import extract_final_answer  # noqa: E402
from tir_envs.rewards.math import GraderPool  # noqa: E402

_GOLD, _PRED = {"gold"}, {"pred", "answer"}
_EXPECTED = {"expected", "result", "expected_result"}


def _argnames(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [a.strip() for a in node.value.split(",")]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant)]
    return None


def sample_suite() -> Path:
    """A three-case test file in Math-Verify's parametrized form (the quick mode's input when
    no Math-Verify checkout is given)."""
    import tempfile
    folder = Path(tempfile.mkdtemp(prefix="grader-agreement-"))
    (folder / "test_sample.py").write_text(
        "import pytest\n\n"
        "@pytest.mark.parametrize('gold,pred,expected', [\n"
        "    ('$\\\\frac{1}{2}$', 'so $\\\\boxed{0.5}$', 1),\n"
        "    ('$3$', 'the answer is $\\\\boxed{4}$', 0),\n"
        "    ('$x+1$', '$\\\\boxed{1+x}$', 1)])\n"
        "def test_math(gold, pred, expected):\n    pass\n")
    return folder


def suite_cases(tests_dir: Path) -> tuple[list[dict], int]:
    """Literal ``(gold, pred, expected)`` cases of every parametrized test, and the number of
    cases skipped because they are not literals."""
    cases, skipped = [], 0
    for path in sorted(tests_dir.glob("test_*.py")):
        tree = ast.parse(path.read_text())
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            for deco in fn.decorator_list:
                if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") ==
                        "parametrize" and len(deco.args) >= 2):
                    continue
                names = _argnames(deco.args[0])
                if not names or not (_GOLD & set(names) and _PRED & set(names)
                                     and _EXPECTED & set(names)):
                    continue
                gi = names.index(next(n for n in names if n in _GOLD))
                pi = names.index(next(n for n in names if n in _PRED))
                ei = names.index(next(n for n in names if n in _EXPECTED))
                for element in getattr(deco.args[1], "elts", []):
                    try:
                        row = ast.literal_eval(element)
                    except ValueError:
                        skipped += 1
                        continue
                    cases.append({"file": path.name, "test": fn.name, "gold": row[gi],
                                  "pred": row[pi], "expected": bool(row[ei])})
    return cases, skipped


def _answer(text: str) -> str | None:
    found = extract_final_answer(text, fallback=True)
    if found is not None:
        return found
    bare = text.strip()
    return bare if bare and "\n" not in bare and len(bare) <= 40 else None


def _gold(text: str) -> str:
    found = extract_final_answer(text, fallback=True)
    if found is None:
        return text.strip().strip("$").strip()
    return ", ".join(found.boxes) if len(found.boxes) > 1 else str(found)


def main(argv: list[str]) -> dict:
    if QUICK and not argv:
        argv = [str(sample_suite())]
    if not argv or not Path(argv[0]).is_dir():
        raise SystemExit("usage: grader_agreement.py PATH/TO/Math-Verify/tests [--details]")
    cases, skipped = suite_cases(Path(argv[0]))
    with GraderPool(workers=2, timeout_s=10) as pool:
        grades = pool.grade_many([(_answer(c["pred"]), _gold(c["gold"])) for c in cases])
    differ = []
    for case, grade in zip(cases, grades):
        if grade.correct != case["expected"]:
            differ.append({"file": case["file"], "test": case["test"],
                           "gold": case["gold"][-120:], "pred": case["pred"][-160:],
                           "expected": case["expected"], "ours": grade.correct,
                           "status": grade.status, "pred_answer": _answer(case["pred"]),
                           "gold_answer": _gold(case["gold"])})
    result = {"benchmark": "grader_agreement", "cases": len(cases), "skipped_not_literal": skipped,
              "agree": len(cases) - len(differ), "differ": len(differ),
              "agreement": round((len(cases) - len(differ)) / max(1, len(cases)), 4)}
    if "--details" in argv:
        result["differences"] = differ
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
