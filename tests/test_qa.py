"""QA rewards (SQuAD/HotpotQA normalisation, EM, F1, answer only from the policy's final
action) and the shipped QA datasets (counts, fields, the HotpotQA paragraph corpus)."""

import gzip
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tir_envs.data.loaders import DatasetError
from tir_envs.data.qa import (HOTPOTQA_PARAGRAPHS, QA_SETS, hotpotqa_paragraphs, load_qa,
                              load_qa_file, load_qa_tasks)
from tir_envs.answers.tags import extract_answer
from tir_envs.protocols.search_r1 import SearchR1Protocol
from tir_envs.rewards.qa import QAReward, exact_match, f1, normalize_answer
from tir_envs.task import Task
from tir_envs.trajectory import Trajectory


@pytest.mark.parametrize("text, expected", [
    ("The Eiffel Tower!", "eiffel tower"),
    ("  an   apple, a pear  ", "apple pear"),
    ("Theatre of the Absurd", "theatre of absurd"),
    ("U.S.A.", "usa"),
    ("", ""),
])
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_uses_any_alias():
    assert exact_match("the Beatles", ["Beatles", "The Fab Four"]) == 1.0
    assert exact_match("December 1972", ["14 December 1972 UTC", "December 1972"]) == 1.0
    assert exact_match("Beatle", "Beatles") == 0.0
    assert exact_match(None, "x") == 0.0


def test_f1_hotpotqa_rules():
    assert f1("Denise Levertov", "Denise Levertov") == 1.0
    assert f1("Levertov", "Denise Levertov") == pytest.approx(2 / 3)
    assert f1("Priscilla Denise Levertov", "Denise Levertov") == pytest.approx(0.8)
    assert f1("yes", "no") == 0.0 and f1("yes it is", "yes") == 0.0  # yes/no only exact
    assert f1("no", ["yes", "no"]) == 1.0
    assert f1("nothing shared", "Denise Levertov") == 0.0
    with pytest.raises(ValueError, match="gold"):
        f1("x", [])


@given(st.text(max_size=40), st.lists(st.text(max_size=40), min_size=1, max_size=3))
def test_scores_are_bounded_and_em_implies_full_f1(pred, golds):
    em, score = exact_match(pred, golds), f1(pred, golds)
    assert em in (0.0, 1.0) and 0.0 <= score <= 1.0
    if em and normalize_answer(pred):
        assert score == 1.0


def test_extract_answer_takes_the_last_complete_tag():
    assert extract_answer("<answer> A </answer> then <answer>B</answer>") == "B"
    assert extract_answer("<answer>unterminated") is None
    assert extract_answer("no tags") is None


def test_reward_reads_only_the_final_action():
    task = Task("t", "Who?", ["Denise Levertov"])
    protocol, reward = SearchR1Protocol(), QAReward("em")
    actions = ["<search>q</search>", "<answer>Denise Levertov</answer>"]
    assert protocol.grade(reward, task, actions, Trajectory()).value == 1.0
    # the gold in an earlier action (or in documents, never passed) earns nothing
    early = ["<answer>Denise Levertov</answer><search>q</search>", "<search>again</search>"]
    result = protocol.grade(reward, task, early, Trajectory())
    assert result.value == 0.0 and result.components["has_answer"] == 0.0
    assert protocol.grade(reward, task, [], Trajectory()).value == 0.0
    assert protocol.grade(QAReward("f1"), task, ["<answer>Levertov</answer>"]).value == \
        pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="metric"):
        QAReward("accuracy")


@pytest.mark.parametrize("name", sorted(QA_SETS))
def test_every_shipped_set_loads_with_its_count(name):
    tasks = load_qa(name)
    assert len(tasks) == QA_SETS[name].count
    assert len({t.id for t in tasks}) == len(tasks)
    for t in tasks:
        assert isinstance(t.question, str) and t.question.strip()
        assert isinstance(t.answer, list) and t.answer and all(isinstance(a, str) for a in t.answer)
        assert t.meta["dataset"] == name


def test_known_records():
    nq = load_qa("nq_open", limit=1)[0]
    assert nq.question == "when was the last time anyone was on the moon"
    assert nq.answer == ["14 December 1972 UTC", "December 1972"]
    hotpot = load_qa("hotpotqa_distractor", limit=1)[0]
    assert hotpot.id == "hotpotqa_distractor/5a7d5c175542991319bc93b1"
    assert hotpot.meta["supporting_titles"] == ["Denise Levertov", "Harvey Pekar"]
    assert hotpot.meta["type"] == "comparison"
    assert load_qa("bamboogle", limit=1)[0].answer == ["james madison"]
    with pytest.raises(ValueError, match="shipped sets"):
        load_qa("triviaqa")


def test_hotpotqa_paragraph_corpus_holds_every_gold_paragraph():
    docs = hotpotqa_paragraphs()
    assert len(docs) == HOTPOTQA_PARAGRAPHS
    titles = [d["title"] for d in docs]
    assert len(set(titles)) == len(titles) and [d["id"] for d in docs][:3] == ["0", "1", "2"]
    assert all(d["text"] and d["text"] == d["text"].strip() for d in docs)
    gold = {t for task in load_qa("hotpotqa_distractor") for t in task.meta["supporting_titles"]}
    assert gold <= set(titles)


def test_load_qa_file_formats_and_errors(tmp_path):
    path = tmp_path / "my.jsonl"
    path.write_text(json.dumps({"question": "q1", "golden_answers": ["a", "b"]}) + "\n"
                    + json.dumps({"id": "x", "question": "q2", "answer": "c"}) + "\n")
    tasks = load_qa_file(path)
    assert [t.answer for t in tasks] == [["a", "b"], ["c"]] and tasks[1].id == "my/x"
    gz = tmp_path / "my.jsonl.gz"
    with gzip.open(gz, "wt") as f:
        f.write(json.dumps({"question": "q", "answers": ["z"]}) + "\n")
    assert load_qa_file(gz)[0].answer == ["z"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q"}) + "\n")
    with pytest.raises(DatasetError, match=r"bad.jsonl:record 1: no gold answer"):
        load_qa_file(bad)
    bad.write_text(json.dumps({"question": "q", "answer": 3}) + "\n")
    with pytest.raises(DatasetError, match="must be a string or a non-empty list"):
        load_qa_file(bad)
    bad.write_text('{"question": "q", "answer": "a"}\n{oops\n')
    with pytest.raises(DatasetError, match=r"bad.jsonl:2: invalid JSON"):
        load_qa_file(bad)


@pytest.mark.parametrize("old, name", [("2wiki_500", "2wiki"), ("musique_500", "musique"),
                                       ("nq_open", "nq")])
def test_one_name_per_shipped_set_with_the_old_name_as_alias(old, name):
    """The Search env, ``load_qa`` and ``tir-envs bench`` call a set by one name; the name
    the env used before still loads the same set under the one name."""
    from tir_envs.bench.suites import PARTS, SUITES
    from tir_envs.data.autotir import load_autotir_tasks
    assert name in QA_SETS and old not in QA_SETS
    by_alias, by_name = load_qa(old, limit=3), load_qa(name, limit=3)
    assert [t.id for t in by_alias] == [t.id for t in by_name]
    assert all(t.id.startswith(f"{name}/") and t.meta["dataset"] == name for t in by_alias)
    assert [t.id for t in load_qa_tasks(old)[:3]] == [t.id for t in by_name]
    assert name in SUITES and PARTS[name].file.endswith(QA_SETS[name].file)
    assert [t.id for t in PARTS[name].load()[:3]] == [t.id for t in by_name]
    assert [t.question for t in load_autotir_tasks(name)[:3]] == [t.question for t in by_name]
