"""The instruction-following training-prompt generator: deterministic, checkable, disjoint
from IFEval, and every instruction type satisfiable by a response written to its arguments."""

import json
import re
from collections import Counter, defaultdict

import pytest

from tir_envs.data.ifeval import ifeval_prompts
from tir_envs.data.instructions import (compatible, generate_instruction_prompts,
                                        generate_instruction_tasks)
from tir_envs.answers.response import final_response
from tir_envs.rewards.ifeval import INSTRUCTION_IDS, IFEvalReward, score_response, validate_kwargs

PROMPTS = generate_instruction_prompts(1500, seed=0)
SINGLE = generate_instruction_prompts(600, seed=1, max_instructions=1)


def test_deterministic_given_the_seed_and_different_across_seeds():
    assert generate_instruction_prompts(200, seed=0) == PROMPTS[:200]
    other = generate_instruction_prompts(200, seed=7)
    assert other != PROMPTS[:200]
    assert [t.question for t in generate_instruction_tasks(50, seed=0)] == \
        [p["prompt"] for p in PROMPTS[:50]]


def test_every_type_is_generated_and_every_prompt_is_checkable():
    seen = Counter(i for p in PROMPTS for i in p["instruction_id_list"])
    assert set(seen) == set(INSTRUCTION_IDS)
    assert {len(p["instruction_id_list"]) for p in PROMPTS} == {1, 2, 3}
    assert len({p["prompt"] for p in PROMPTS}) == len(PROMPTS)
    for p in PROMPTS:
        ids = p["instruction_id_list"]
        assert len(ids) == len(p["kwargs"]) == len(set(ids))
        for iid, kw in zip(ids, p["kwargs"]):
            assert validate_kwargs(iid, kw) == kw
        assert all(compatible(a, b) for a in ids for b in ids if a != b)
    for p in PROMPTS[:300]:
        score_response("Some answer.", p["instruction_id_list"], p["kwargs"])  # checkers run


def test_tasks_carry_domain_tool_and_instructions():
    task = generate_instruction_tasks(3, seed=2)[2]
    assert task.id == "ifgen-2-2" and task.answer is None
    assert task.meta["domain"] == "instruction" and task.meta["tool"] is None
    assert task.meta["instruction_id_list"] and len(task.meta["kwargs"]) == \
        len(task.meta["instruction_id_list"])
    json.dumps(task.meta)  # plain data: writable to a JSONL task file


def _words(text):
    return re.findall(r"\w+", text.lower())


def _grams(words, n):
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def test_disjoint_from_ifeval_no_equal_and_no_near_duplicate_prompt():
    held_out = [_words(p) for p in ifeval_prompts()]
    held_norm = {" ".join(w) for w in held_out}
    # the three answers of constrained_response must be quoted verbatim: not a near-duplicate
    options = _words('"My answer is yes.", "My answer is no.", "My answer is maybe."')
    allowed = _grams(options, 8)
    shingles = [_grams(w, 3) for w in held_out]
    eights = set().union(*(_grams(w, 8) for w in held_out)) - allowed
    index = defaultdict(set)
    for j, grams in enumerate(shingles):
        for g in grams:
            index[g].add(j)
    for p in PROMPTS + generate_instruction_prompts(1500, seed=3):
        words = _words(p["prompt"])
        assert " ".join(words) not in held_norm
        assert not (_grams(words, 8) & eights), p["prompt"]
        mine = _grams(words, 3)
        overlap = Counter(j for g in mine for j in index.get(g, ()))
        for j, shared in overlap.items():
            assert shared / len(mine | shingles[j]) < 0.5, (p["prompt"], ifeval_prompts()[j])


SENTENCES = ["The harbor town wakes up slowly in spring.", "Boats leave the pier before dawn.",
             "A baker opens his shop on the square at six.",
             "Visitors walk across the old stone bridge.", "In the evening the cafes fill up."]
LANGUAGE_TEXT = {
    "fr": "Aujourd'hui il fait beau et chaud alors nous allons au parc avec nos amis.",
    "de": "Heute ist das Wetter sonnig und warm und wir gehen mit unseren Freunden in den Park.",
    "es": "Hoy hace sol y calor y vamos al parque con nuestros amigos.",
    "it": "Oggi il tempo e bello e caldo e andiamo al parco con i nostri amici.",
    "pt": "Hoje o tempo esta bonito e quente e vamos ao parque com os nossos amigos.",
    "ru": "Сегодня солнечно и тепло и мы идем в парк с нашими друзьями.",
    "ko": "오늘은 날씨가 맑고 따뜻해서 우리는 친구들과 함께 공원에 갑니다.",
    "sw": "Leo hali ya hewa ni nzuri na tunaenda bustanini pamoja na marafiki zetu.",
    "vi": "Hôm nay trời đẹp và ấm áp nên chúng tôi đi công viên cùng bạn bè.",
    "fi": "Tänään on kaunis ja lämmin sää ja menemme puistoon ystäviemme kanssa.",
    "tr": "Bugün hava güzel ve sıcak ve arkadaşlarımızla birlikte parka gidiyoruz.",
    "nl": "Vandaag is het mooi en warm weer en we gaan met onze vrienden naar het park.",
    "pl": "Dzisiaj jest piękna i ciepła pogoda i idziemy do parku z naszymi przyjaciółmi.",
}


def _compliant(iid, kw, prompt):
    """A response written to follow one instruction with these arguments."""
    base = " ".join(SENTENCES[:3])
    paragraphs = lambda n, sep: sep.join(SENTENCES[i % 5] for i in range(n))  # noqa: E731
    below = kw.get("relation") == "less than"
    builders = {
        "keywords:existence": lambda: f"{base} We saw a {' and a '.join(kw.get('keywords', []))}.",
        "keywords:frequency": lambda: "Calm water." if below else
        f"{base} " + " ".join([kw.get("keyword", "")] * kw.get("frequency", 0)),
        "keywords:forbidden_words": lambda: base,
        "keywords:letter_frequency": lambda: "Ok." if kw.get("let_relation") == "less than"
        else base + " " + kw.get("letter", "") * kw.get("let_frequency", 0),
        "language:response_language": lambda: LANGUAGE_TEXT.get(kw.get("language"), ""),
        "length_constraints:number_sentences": lambda: paragraphs(
            kw.get("num_sentences", 0) - below, " "),
        "length_constraints:number_paragraphs": lambda: paragraphs(
            kw.get("num_paragraphs", 0), "\n***\n"),
        "length_constraints:number_words": lambda: " ".join(
            ["sun"] * (kw.get("num_words", 0) - below)),
        "length_constraints:nth_paragraph_first_word": lambda: "\n\n".join(
            (f"{kw['first_word'].capitalize()} {SENTENCES[i % 5].lower()}"
             if i + 1 == kw.get("nth_paragraph") else SENTENCES[i % 5])
            for i in range(kw.get("num_paragraphs", 0))),
        "detectable_content:number_placeholders": lambda: base + " " + " ".join(
            f"[field {i}]" for i in range(kw.get("num_placeholders", 0))),
        "detectable_content:postscript":
            lambda: f"{base}\n\n{kw.get('postscript_marker')} See you.",
        "detectable_format:number_bullet_lists": lambda: "\n".join(
            f"* {SENTENCES[i % 5]}" for i in range(kw.get("num_bullets", 0))),
        "detectable_format:constrained_response": lambda: "My answer is maybe.",
        "detectable_format:number_highlighted_sections": lambda: " ".join(
            f"*part {i}* {SENTENCES[i % 5]}" for i in range(kw.get("num_highlights", 0))),
        "detectable_format:multiple_sections": lambda: "\n".join(
            f"{kw.get('section_spliter')} {i + 1}\n{SENTENCES[i % 5]}"
            for i in range(kw.get("num_sections", 0))),
        "detectable_format:json_format": lambda: json.dumps({"answer": base}),
        "detectable_format:title": lambda: f"<<Spring In The Harbor>>\n{base}",
        "combination:two_responses": lambda: f"{SENTENCES[0]}\n******\n{SENTENCES[1]}",
        "combination:repeat_prompt": lambda: f"{kw.get('prompt_to_repeat')}\n{base}",
        "startend:end_checker": lambda: f"{base} {kw.get('end_phrase')}",
        "change_case:capital_word_frequency": lambda: "calm water." if
        kw.get("capital_relation") == "less than" else
        base + " " + " ".join(["NOW"] * kw.get("capital_frequency", 0)),
        "change_case:english_capital": lambda: base.upper(),
        "change_case:english_lowercase": lambda: base.lower(),
        "punctuation:no_comma": lambda: base,
        "startend:quotation": lambda: f'"{base}"',
    }
    return builders[iid]()


def test_a_response_written_to_the_arguments_passes_for_every_type():
    seen = set()
    for p in SINGLE:
        (iid,), (kw,) = p["instruction_id_list"], p["kwargs"]
        seen.add(iid)
        response = _compliant(iid, kw, p["prompt"])
        verdict = score_response(response, [iid], [kw])
        assert verdict.strict_prompt, (iid, kw, response)
    assert seen == set(INSTRUCTION_IDS)


@pytest.mark.parametrize("iid", ["length_constraints:number_words", "startend:quotation",
                                 "detectable_format:number_bullet_lists", "punctuation:no_comma"])
def test_the_reward_tells_a_compliant_response_from_a_violating_one(iid):
    task = next(t for t in generate_instruction_tasks(600, seed=1, max_instructions=1)
                if t.meta["instruction_id_list"] == [iid])
    kw = task.meta["kwargs"][0]
    good = _compliant(iid, kw, task.question)
    bad = {"length_constraints:number_words": good + " sun" if kw.get("relation") == "less than"
           else "sun",
           "startend:quotation": good.strip('"'),
           "detectable_format:number_bullet_lists": good + "\n* one more",
           "punctuation:no_comma": good + " Yes, no."}[iid]
    reward = IFEvalReward()
    assert reward.score(task, None, final_response([f"<think>plan</think>{good}"])).value == 1.0
    assert reward.score(task, None, bad).value == 0.0
