"""The 25 IFEval instruction ids (Zhou et al. 2023) and the arguments each one takes, checked.

This is the data side of IFEval: what a record's ``instruction_id_list`` and ``kwargs`` may
hold.  The dataset loader and the training-prompt generator check their records with it, and
the reward (``tir_envs.rewards.ifeval``) pairs each id with its checker; keeping the schema here,
below both, is what lets the loaders check records without importing the reward.
"""

from __future__ import annotations

from typing import Any, Mapping

RELATIONS = ("less than", "at least")

#: langdetect's language codes: a ``language`` outside them could never be detected
LANGUAGE_CODES = frozenset(
    "af ar bg bn ca cs cy da de el en es et fa fi fr gu he hi hr hu id it ja kn ko lt lv mk ml "
    "mr ne nl no pa pl pt ro ru sk sl so sq sv sw ta te th tl tr uk ur vi zh-cn zh-tw".split())

#: each instruction id and the arguments it takes (all required), in IFEval's order
PARAMS: dict[str, tuple[str, ...]] = {
    "keywords:existence": ("keywords",),
    "keywords:frequency": ("keyword", "frequency", "relation"),
    "keywords:forbidden_words": ("forbidden_words",),
    "keywords:letter_frequency": ("letter", "let_frequency", "let_relation"),
    "language:response_language": ("language",),
    "length_constraints:number_sentences": ("num_sentences", "relation"),
    "length_constraints:number_paragraphs": ("num_paragraphs",),
    "length_constraints:number_words": ("num_words", "relation"),
    "length_constraints:nth_paragraph_first_word": ("num_paragraphs", "nth_paragraph",
                                                    "first_word"),
    "detectable_content:number_placeholders": ("num_placeholders",),
    "detectable_content:postscript": ("postscript_marker",),
    "detectable_format:number_bullet_lists": ("num_bullets",),
    "detectable_format:constrained_response": (),
    "detectable_format:number_highlighted_sections": ("num_highlights",),
    "detectable_format:multiple_sections": ("section_spliter", "num_sections"),
    "detectable_format:json_format": (),
    "detectable_format:title": (),
    "combination:two_responses": (),
    "combination:repeat_prompt": ("prompt_to_repeat",),
    "startend:end_checker": ("end_phrase",),
    "change_case:capital_word_frequency": ("capital_frequency", "capital_relation"),
    "change_case:english_capital": (),
    "change_case:english_lowercase": (),
    "punctuation:no_comma": (),
    "startend:quotation": (),
}

INSTRUCTION_IDS: tuple[str, ...] = tuple(PARAMS)

_INT_PARAMS = frozenset({"frequency", "let_frequency", "capital_frequency", "num_sentences",
                         "num_paragraphs", "num_words", "nth_paragraph", "num_placeholders",
                         "num_bullets", "num_highlights", "num_sections"})
_RELATION_PARAMS = frozenset({"relation", "let_relation", "capital_relation"})
_LIST_PARAMS = frozenset({"keywords", "forbidden_words"})


def validate_kwargs(instruction_id: str, kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments of one instruction, checked; ``None`` values are dropped first (the
    Hugging Face copy of IFEval lists every argument name with ``None`` for the unused ones).

    Raises ``ValueError`` naming the instruction, the argument and what it should be.
    """
    params = instruction_params(instruction_id)
    given = {k: v for k, v in (kwargs or {}).items() if v is not None}
    unknown = sorted(set(given) - set(params))
    missing = [p for p in params if p not in given]
    if unknown or missing:
        raise ValueError(f"{instruction_id}: takes {list(params) or 'no arguments'}; "
                         f"missing {missing}, unexpected {unknown}")
    for name, value in given.items():
        _check_value(instruction_id, name, value)
    if instruction_id == "length_constraints:nth_paragraph_first_word" \
            and given["nth_paragraph"] > given["num_paragraphs"]:
        raise ValueError(f"{instruction_id}: nth_paragraph={given['nth_paragraph']} is past "
                         f"num_paragraphs={given['num_paragraphs']}")
    return given


def _check_value(instruction_id: str, name: str, value: Any) -> None:
    where = f"{instruction_id}: argument {name}={value!r}"
    if name in _INT_PARAMS:
        low = 1 if name == "nth_paragraph" else 0
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{where} must be an integer >= {low}")
    elif name in _RELATION_PARAMS:
        if value not in RELATIONS:
            raise ValueError(f"{where} must be one of {RELATIONS}")
    elif name in _LIST_PARAMS:
        if isinstance(value, str) or not value or not all(
                isinstance(w, str) and w.strip() for w in value):
            raise ValueError(f"{where} must be a non-empty list of non-empty strings")
    elif not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where} must be a non-empty string")
    elif name == "letter" and len(value) != 1:
        raise ValueError(f"{where} must be a single character")
    elif name == "language" and value not in LANGUAGE_CODES:
        raise ValueError(f"{where} is not a language code langdetect can return "
                         f"(one of {sorted(LANGUAGE_CODES)})")


def instruction_params(instruction_id: str) -> tuple[str, ...]:
    """The arguments ``instruction_id`` takes; a ``ValueError`` listing the known ids if it is
    not one."""
    try:
        return PARAMS[instruction_id]
    except KeyError:
        raise ValueError(f"unknown IFEval instruction id {instruction_id!r}; known ids: "
                         f"{', '.join(INSTRUCTION_IDS)}") from None
