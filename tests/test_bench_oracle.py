"""Every gold is gradable in its own protocol; adversaries score nothing.

The oracle writes each item's gold answer in its suite's protocol (one action, no tool call)
and must score 100% on the full item set of every suite.  A fixed wrong answer scores 0; the
gold with its answer tag left open scores 0 and counts as no answer.
"""

from __future__ import annotations

import pytest

from tir_envs.bench import SUITES, run
from tir_envs.bench.oracle import adversary, oracle
from tir_envs.bench.store import RunStore

ADVERSARY_ITEMS = 15


def _records(folder, suite):
    return RunStore(folder).suite_records(suite)


def _failures(records, expect_correct: bool):
    return [(r["task_id"], r["answer"], r["components"]) for r in records
            if r["correct"] != expect_correct]


#: IFEval prompts no response can follow: the request to repeat verbatim holds a comma, a
#: forbidden word or too many of a limited keyword (checked by ``contradicts`` below)
IFEVAL_CONTRADICTORY = {"ifeval-374", "ifeval-1627", "ifeval-3369", "ifeval-3371", "ifeval-3718"}


@pytest.mark.parametrize("suite", [n for n, s in SUITES.items() if not s.judge])
def test_oracle_scores_every_item_of_every_suite(suite, tmp_path):
    summary = run(suite, oracle(), out=tmp_path, k=1, progress=False, report=False)
    assert summary == {}
    records = _records(tmp_path, suite)
    assert len(records) == SUITES[suite].count
    assert all(r["answered"] and r["tool_calls"] == 0 and not r["infra_failed"]
               for r in records)
    failed = {r["task_id"] for r in records if not r["correct"]}
    expected = IFEVAL_CONTRADICTORY if any(p.name == "ifeval" for p in SUITES[suite].parts) \
        else set()
    assert failed == expected


def test_the_ifeval_prompts_the_oracle_cannot_follow_are_contradictory():
    from tir_envs.bench.ifeval_oracle import NoResponse, contradicts, ifeval_response
    from tir_envs.data.ifeval import load_ifeval

    tasks = {t.id: t for t in load_ifeval()}
    for task_id in IFEVAL_CONTRADICTORY:
        reason = contradicts(tasks[task_id])
        assert reason and "the prompt to repeat verbatim contains" in reason
        with pytest.raises(NoResponse, match="contradict each other"):
            ifeval_response(tasks[task_id])
    assert [t for t in tasks if t not in IFEVAL_CONTRADICTORY and contradicts(tasks[t])] == []


@pytest.mark.parametrize("protocol", ["zerotir", "rite"])
def test_oracle_scores_every_math500_item_in_the_other_math_protocols(protocol, tmp_path):
    run("math500", oracle(), out=tmp_path, k=1, protocol=protocol, progress=False,
        report=False)
    records = _records(tmp_path, "math500")
    assert len(records) == 500 and _failures(records, True) == []


#: IFEval has no gold answer: the response itself is scored, so a fixed string may follow
#: some prompts' instructions and a left-open tag is just text (docs/benchmarks.md)
#: judged suites need an LLM judge (tests/test_judge_bench.py runs them with one)
GRADED = [name for name, suite in SUITES.items()
          if all(p.scoring != "ifeval" for p in suite.parts) and not suite.judge]


def _part_summaries(summary, suite):
    return summary["suites"][suite]["parts"].values()


def _adversary_run(suite, kind, out):
    """(summary, graded records) of one adversary run; every graded part was answered."""
    summary = run(suite, adversary(kind), out=out, k=1, limit=ADVERSARY_ITEMS, progress=False)
    graded = [r for r in _records(out, suite) if r["part"] != "ifeval"]
    assert len(graded) == ADVERSARY_ITEMS * len(GRADED_PARTS[suite])
    return summary, graded


@pytest.mark.parametrize("suite", GRADED + ["autotir"])
def test_a_fixed_wrong_answer_scores_zero(suite, tmp_path):
    summary, graded = _adversary_run(suite, "wrong", tmp_path)
    assert _failures(graded, False) == []
    # a wrong answer is an answer; a string that names no option is no choice at all
    assert all(r["answered"] == (r["part"] != "logiqa") for r in graded)
    for part in _part_summaries(summary, suite):
        if part["scoring"] != "ifeval":
            assert part["avg_at_k"] == 0.0 and part["maj_at_k"] == 0.0


@pytest.mark.parametrize("suite", GRADED + ["autotir"])
def test_an_answer_tag_never_closed_scores_zero_and_is_no_answer(suite, tmp_path):
    summary, graded = _adversary_run(suite, "unclosed", tmp_path)
    assert _failures(graded, False) == [] and not any(r["answered"] for r in graded)
    for part in _part_summaries(summary, suite):
        if part["scoring"] != "ifeval":
            assert part["avg_at_k"] == 0.0 and part["no_answer"] == 1.0


GRADED_PARTS = {name: [p.name for p in suite.parts if p.scoring != "ifeval"]
                for name, suite in SUITES.items()}


@pytest.mark.parametrize("suite", [n for n, s in SUITES.items() if not s.judge])
def test_the_oracle_scores_without_tools_too(suite, tmp_path):
    run(suite, oracle(), out=tmp_path, k=1, limit=3, use_tools=False, progress=False,
        report=False)
    records = _records(tmp_path, suite)
    assert len(records) == 3 * len(SUITES[suite].parts) and _failures(records, True) == []


@pytest.mark.parametrize("protocol", ["zerotir", "rite"])
@pytest.mark.parametrize("kind", ["wrong", "unclosed"])
def test_adversaries_in_the_other_math_protocols(protocol, kind, tmp_path):
    run("aime24", adversary(kind), out=tmp_path, k=1, protocol=protocol,
        limit=ADVERSARY_ITEMS, progress=False, report=False)
    records = _records(tmp_path, "aime24")
    assert len(records) == ADVERSARY_ITEMS and _failures(records, False) == []
    assert all(r["answered"] == (kind == "wrong") for r in records)
