"""IFEval scoring: arguments, strict/loose verdicts, accuracies, the reward, the shipped prompts."""

import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tir_envs.data.ifeval import IFEVAL_COUNT, load_ifeval
from tir_envs.rewards.ifeval import (INSTRUCTION_IDS, IFEvalReward, IFEvalVerdict, aggregate,
                                     check_instruction, loose_variants, score_response,
                                     validate_kwargs)
from tir_envs.rewards.ifeval.instructions import (check_instruction, count_bullets,
                                                  count_placeholders)
from tir_envs.rewards.ifeval.text import count_sentences, count_words, detect_language
from tir_envs.answers.response import final_response
from tir_envs.task import Task


def test_there_are_the_25_instruction_types_of_ifeval():
    assert len(INSTRUCTION_IDS) == 25 == len(set(INSTRUCTION_IDS))


@pytest.mark.parametrize("iid, kwargs, fragment", [
    ("keywords:nonexistent", {}, "unknown IFEval instruction id"),
    ("length_constraints:number_words", {"num_words": 10}, "missing ['relation']"),
    ("length_constraints:number_words", {"num_words": 10, "relation": "at most"}, "at least"),
    ("length_constraints:number_words", {"num_words": True, "relation": "at least"}, "integer"),
    ("length_constraints:number_words", {"num_words": -1, "relation": "at least"}, "integer"),
    ("punctuation:no_comma", {"num_words": 3}, "unexpected ['num_words']"),
    ("keywords:existence", {"keywords": "lantern"}, "list"),
    ("keywords:letter_frequency", {"letter": "ab", "let_frequency": 2,
                                   "let_relation": "at least"}, "single character"),
    ("language:response_language", {"language": "xx"}, "langdetect"),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 3, "first_word": "so"}, "past num_paragraphs"),
])
def test_bad_arguments_are_rejected_with_the_reason(iid, kwargs, fragment):
    with pytest.raises(ValueError, match=None) as err:
        validate_kwargs(iid, kwargs)
    assert fragment in str(err.value)


def test_none_valued_arguments_are_dropped_as_in_the_hugging_face_copy():
    hf = {"num_words": 5, "relation": "at least", "keywords": None, "language": None}
    assert validate_kwargs("length_constraints:number_words", hf) == \
        {"num_words": 5, "relation": "at least"}


def test_score_response_checks_the_lengths_match():
    with pytest.raises(ValueError, match="one dict"):
        score_response("x", ["punctuation:no_comma", "startend:quotation"], [{}])
    with pytest.raises(ValueError, match="non-empty list"):
        score_response("x", "punctuation:no_comma")


def test_a_blank_response_follows_nothing_even_loosely():
    v = score_response("  \n ", ["punctuation:no_comma", "keywords:forbidden_words"],
                       [{}, {"forbidden_words": ["bad"]}])
    assert v.strict_inst == (False, False) and v.loose_inst == (False, False)
    assert check_instruction("punctuation:no_comma", "") is False


def test_loose_forgives_a_preamble_line_and_markdown_stars():
    response = 'Sure, here it is:\n{"city": "Paris"}'
    v = score_response(response, ["detectable_format:json_format"])
    assert (v.strict_prompt, v.loose_prompt) == (False, True)
    assert loose_variants("a\n*b*\nc") == ["a\n*b*\nc", "a\nb\nc", "*b*\nc", "a\n*b*", "*b*",
                                           "b\nc", "a\nb", "b"]
    bold_end = score_response("Done.\n**Any other questions?**", ["startend:end_checker"],
                              [{"end_phrase": "Any other questions?"}])
    assert (bold_end.strict_prompt, bold_end.loose_prompt) == (False, True)


def test_verdict_soft_share_and_ifscore():
    v = score_response("Hello, world. My answer is yes.",
                       ["punctuation:no_comma", "detectable_format:constrained_response",
                        "length_constraints:number_words"],
                       [{}, {}, {"num_words": 3, "relation": "at least"}])
    assert v.strict_inst == (False, True, True)
    assert v.soft == pytest.approx(2 / 3) and v.ifscore == 0.0 and not v.strict_prompt


def test_aggregate_computes_the_four_accuracies_and_soft():
    verdicts = [IFEvalVerdict(("a", "b"), (True, True), (True, True)),
                IFEvalVerdict(("a", "b", "c"), (True, False, False), (True, True, False)),
                IFEvalVerdict(("a",), (False,), (True,))]
    acc = aggregate(verdicts)
    assert acc.prompt_strict == pytest.approx(1 / 3)
    assert acc.prompt_loose == pytest.approx(2 / 3)
    assert acc.inst_strict == pytest.approx(3 / 6)
    assert acc.inst_loose == pytest.approx(5 / 6)
    assert acc.soft == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert acc.soft_loose == pytest.approx((1 + 2 / 3 + 1) / 3)
    assert (acc.prompts, acc.instructions) == (3, 6)
    with pytest.raises(ValueError):
        aggregate([])


def test_counts_follow_ifevals_tokenizers():
    assert count_words("Don't stop-believing, e-mail me!") == 7  # don t stop believing e mail me
    assert count_sentences("Dr. Smith arrived at 5 p.m. on Monday. He left at once.") == 2
    assert count_sentences("* one\n* two\n* three") == 1  # no end punctuation: one sentence


def test_language_detection_is_deterministic():
    text = "BONJOUR MON AMI, COMMENT VAS-TU CE MATIN?"  # langdetect is unsure of this one
    assert len({detect_language(text + " " * i) for i in range(6)}) == 1
    assert detect_language("Das Wetter ist heute sehr schön und warm.") == "de"


def test_user_words_are_matched_literally_not_as_regular_expressions():
    assert check_instruction("keywords:existence", "I write C++ daily.", {"keywords": ["C++"]})
    assert not check_instruction("keywords:existence", "I write CCC daily.", {"keywords": ["C+"]})
    assert check_instruction("keywords:frequency", "a.b a.b axb",
                             {"keyword": "a.b", "frequency": 3, "relation": "less than"})


def test_letter_frequency_counts_the_given_character_even_punctuation():
    kw = {"letter": "!", "let_frequency": 3, "let_relation": "at least"}
    assert check_instruction("keywords:letter_frequency", "Wow! Yes! Great!", kw)
    assert not check_instruction("keywords:letter_frequency", "Wow! Yes.", kw)


def _task(ids, kwargs):
    return Task("t", "prompt", meta={"instruction_id_list": ids, "kwargs": kwargs})


def test_reward_scores_only_the_final_response_without_reasoning():
    task = _task(["punctuation:no_comma", "startend:end_checker"],
                 [{}, {"end_phrase": "Peace!"}])
    reward = IFEvalReward()
    response = final_response(["<search>a, b, c</search>",
                               "<think>Hmm, commas, no.</think>All done. Peace!"])
    assert response == "All done. Peace!"
    ok = reward.score(task, None, response)
    assert ok.value == 1.0 and ok.correct is True and ok.answered is True
    half = reward.score(task, None, "Done, Peace!")
    assert half.value == 0.0 and half.components["soft"] == 0.5 and half.correct is False
    assert IFEvalReward(mode="soft").score(task, None, "Done, Peace!").value == 0.5
    empty = reward.score(task, None, final_response([]))
    assert empty.value == 0.0 and empty.answered is False
    assert final_response(["x", "</think> tail "]) == "tail"


def test_reward_modes_and_missing_instructions_are_errors():
    with pytest.raises(ValueError, match="mode"):
        IFEvalReward(mode="lenient")
    with pytest.raises(ValueError, match="instruction_id_list"):
        IFEvalReward().score(Task("x", "q"), None, "text")
    loose = IFEvalReward(mode="loose").score(_task(["startend:quotation"], [{}]),
                                             None, 'Here:\n"All quoted."')
    assert loose.value == 1.0 and loose.components["strict"] == 0.0


def test_shipped_ifeval_prompts_load_as_instruction_tasks():
    tasks = load_ifeval()
    assert len(tasks) == IFEVAL_COUNT == 541
    assert len({t.id for t in tasks}) == 541
    ids = Counter(i for t in tasks for i in t.meta["instruction_id_list"])
    assert set(ids) == set(INSTRUCTION_IDS) and sum(ids.values()) == 834
    first = tasks[0]
    assert first.id == "ifeval-1000" and first.answer is None
    assert first.meta["domain"] == "instruction" and first.meta["tool"] is None
    assert first.meta["kwargs"][2] == {"relation": "at least", "num_words": 300}
    assert len(load_ifeval(limit=5)) == 5


# IFEval defines these three by regular expressions that take quadratic time on adversarial
# replies (many blank lines, many "[" or "<<" on a line); ours count the same matches in linear
# time.  The regexes are the definition: compare on random texts over the characters that matter.
_STAR = re.compile(r"^\s*\*[^\*].*$", flags=re.MULTILINE)
_DASH = re.compile(r"^\s*-.*$", flags=re.MULTILINE)


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet=" \n\t\r\x0b\u2028*-a[]<>", max_size=24))
def test_linear_counters_match_ifevals_regular_expressions(text):
    assert count_bullets(text) == len(_STAR.findall(text)) + len(_DASH.findall(text))
    assert count_placeholders(text) == len(re.findall(r"\[.*?\]", text))
    titles = re.findall(r"<<[^\n]+>>", text)
    assert check_instruction("detectable_format:title", text) == \
        (bool(text.strip()) and any(t.lstrip("<").rstrip(">").strip() for t in titles))


def test_adversarial_replies_are_scored_not_raised():
    deep = "[" * 100_000
    assert check_instruction("detectable_format:json_format", deep) is False
    many_lines = "\n" * 50_000 + "* a"
    assert check_instruction("detectable_format:number_bullet_lists", many_lines,
                             {"num_bullets": 1})


@pytest.mark.parametrize("response, ok", [
    ("My answer is yes.", True),
    ("After thinking it over, My answer is no.", True),
    ("My answer is maybe. To repeat: My answer is maybe.", True),
    ("My answer is yes. My answer is no.", False),  # issue 21: a hedge; the reference passes it
    ("My answer is yes. My answer is no. My answer is maybe.", False),
])
def test_constrained_response_takes_one_answer(response, ok):
    assert check_instruction("detectable_format:constrained_response", response, {}) is ok
