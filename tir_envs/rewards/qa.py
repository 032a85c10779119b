"""Open-domain QA rewards: exact match and token F1 with the SQuAD/HotpotQA normalisation.

``normalize_answer`` lower-cases, drops punctuation and the articles a/an/the, and collapses
whitespace (the SQuAD v1.1 evaluation rule, also used by HotpotQA, NQ-open and Search-R1).
``f1`` follows the HotpotQA scorer: a yes/no/noanswer prediction or gold only scores when both
sides are the same special answer.  Several gold aliases: the best match counts.

``QAReward`` grades the answer the protocol read from the policy's own final action (its last
``<answer>…</answer>``, ``extract_answer``), never the prompt or retrieved documents, so an
answer that merely appears in a search result earns nothing.

Hedges never pay.  An answer that lists candidates ("Paris or London", "either Paris or
London", "Paris, London, Rome", "Paris/London", "Paris and London", one per line) scores as its
*worst* candidate (each candidate scored against its best gold), so it never earns more than
answering that candidate alone, and F1's partial credit for the right name among wrong ones is
gone.  A separator is one only where no gold alias itself contains it ("Guthred or Guthfrith",
"Helsinki, Finland", "Simon and Garfunkel", "AC/DC" are compared whole), and an answer equal to
a gold alias is that alias whatever it contains.  Commas inside numbers (``9,000``) and dates
(``June 10, 1982``) separate nothing.  ``candidates`` shows the split.

Which characters separate is an allow-list, not a list of separators: a candidate is made of
letters, digits, combining marks, single spaces, and the in-name punctuation judged by its own
rule (apostrophes, commas, periods after an initial or abbreviation, hyphens inside a word,
``&``, ``/``).  Every other character separates unless a gold alias holds it: tabs, line and
paragraph separators, doubled spaces, arrows, ``+``, ``|``, dashes, brackets, quotes, CJK
punctuation; and so does every letter of a script no gold alias is written in (``41 或 42``).
Words that join candidates (or, and, vs, versus, nor, plus, rather than, 或, ...) separate
unless a gold alias holds them.  On a comparison question ("Who is older, Annie Morton
or Terry Richardson?") the other option is a candidate wherever the answer names it, even
joined by a plain space ("Terry Richardson Annie Morton"): ``rivals`` finds it in the question.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from typing import TYPE_CHECKING, Any, Iterable

from tir_envs.rewards.base import Reward, RewardResult

if TYPE_CHECKING:
    from tir_envs.task import Task
    from tir_envs.trajectory import Trajectory

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = frozenset(string.punctuation)
_SPECIAL = ("yes", "no", "noanswer")
METRICS = ("em", "f1")


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def gold_list(golds: Any) -> list[str]:
    """Gold answers as a list of strings (a single string, or any iterable of them)."""
    if golds is None:
        raise ValueError("the task has no gold answer; QA rewards need task.answer "
                         "(a string or a list of acceptable strings)")
    if isinstance(golds, str):
        return [golds]
    if isinstance(golds, (int, float)):
        return [str(golds)]
    out = [str(g) for g in golds]
    if not out:
        raise ValueError("the gold answer list is empty; give at least one acceptable answer")
    return out


# Candidate separators, by kind: a kind that appears in any gold alias separates nothing.
_SEPARATORS = {
    "or": re.compile(r"(?:\s+|\s*\()(?:and/)?or\s+|^\s*either\s+"
                     r"|\s*(?:\\lor|\\vee|∨)(?![A-Za-z])\s*", re.IGNORECASE),
    "and": re.compile(r"\s+(?:and|&)\s+", re.IGNORECASE),
    "versus": re.compile(r"\s+(?:vs\.?|v\.|versus|nor|plus|but|as well as|rather than"
                         r"|instead of|then|或者?|还是|和|与|及|または|と|또는)\s+", re.IGNORECASE),
    "comma": re.compile(r",(?!\d{3}(?!\d))(?<!\b\d,(?=\s*\d{4}\b))(?<!\b\d\d,(?=\s*\d{4}\b))"),
    "slash": re.compile(r"(?<!\d)\s*/\s*(?!\d)|\s+/\s+"),
    "semicolon": re.compile(r";"),
    "pipe": re.compile(r"\|"),
    "line": re.compile(r"\n"),
    # a hyphen with a space beside it; a period ending a word of 3+ letters (not an initial)
    "dash": re.compile(r"\s+-+\s*|\s*-+\s+"),
    "period": re.compile(r"(?<=[^\W\d]{3})\.(?=\s|$)|(?<=\s)\.(?=\s)"),
    "spaces": re.compile(r" {2,}"),
}
_WHITESPACE_RUN = re.compile(r"\s{3,}")


def _short_runs(text: str) -> str:
    """``text`` with each whitespace run longer than two written as what the separators tell
    apart in it (two spaces in a row, a newline): their ``\\s+`` restart at every character of
    a run, so a 64-token answer of 8,000 spaces cost 7 s of reward time, growing with the
    square of its length."""
    return _WHITESPACE_RUN.sub(lambda m: ("  " if "  " in m.group() else " ")
                               + ("\n" if "\n" in m.group() else ""), text)


#: characters a candidate may hold besides letters, digits, marks and a space; each is judged
#: by its own separator rule above
_IN_NAME = frozenset("'’‘`´.,-&/")


def _separates(ch: str) -> bool:
    """Whether ``ch`` separates candidates wherever it stands (``_IN_NAME`` aside)."""
    if ch == " " or ch in _IN_NAME:
        return False
    if ch.isspace():
        return True  # tab, newline, U+2028/2029, no-break and ideographic spaces
    return not (ch.isalnum() or unicodedata.category(ch).startswith("M"))


def _script(ch: str) -> str:
    """The writing system of a letter, by its Unicode name (LATIN, CYRILLIC, CJK, ...)."""
    return unicodedata.name(ch, "?").split(" ")[0]


def _split_symbols(text: str, allowed: set[str]) -> list[str]:
    """``text`` cut at every separating character no gold alias holds, and around every run
    of letters of a script no gold alias is written in (``41 或 42``: a joining word of
    another script is a candidate of its own)."""
    scripts = {_script(c) for c in allowed if c.isalpha()} or {"LATIN"}
    parts, current, foreign = [], [], False
    for ch in text:
        if ch not in allowed and _separates(ch):
            parts.append("".join(current))
            current, foreign = [], False
            continue
        other = ch.isalpha() and ch not in allowed and _script(ch) not in scripts
        if current and ch.isalpha() and other != foreign:
            parts.append("".join(current))
            current = []
        if ch.isalpha():
            foreign = other
        current.append(ch)
    return parts + ["".join(current)]


def candidates(prediction: str, golds: str | Iterable[str]) -> list[str]:
    """The candidates ``prediction`` lists, by the separators no gold alias contains (see the
    module docstring); ``[prediction]`` when it names one."""
    golds = gold_list(golds)
    in_golds = set("".join(golds))
    parts = [_short_runs(p) for p in _split_symbols(prediction, in_golds)]
    for kind, separator in _SEPARATORS.items():
        if any(separator.search(g) for g in golds):
            continue
        parts = [piece for part in parts for piece in separator.split(part)]
    parts = [p.strip() for p in parts if normalize_answer(p)]
    return parts if len(parts) > 1 else [prediction]


# A choice in a question: "…, X or Y?", "…: the X, the Y, or the Z?", "out of X and Y".
_JOIN = re.compile(r"\s+(?:or|and)\s+", re.IGNORECASE)
# the stem before a first option: "who is younger Keith Bostic", "Which has more species Laurus"
_LEAD = re.compile(r"^(?:(?i:who|whom|whose|which|what|when|where|how|is|are|was|were|did|do|does"
                   r"|in|of|out|among|between)\s+)*(?:[a-z'’]+\s+)*(?=[A-Z0-9\"“])")
_STOP = frozenset("of to in on at for and or by with from de la le da di del von van".split())


_OR = re.compile(r"\s+or\s+", re.IGNORECASE)
_END = re.compile(r"[?,;:()]|\s[-–—]+\s")  # where an option ends


def _options(question: str) -> list[list[str]]:
    """Each choice the question offers, as its options (a stem before them is dropped).
    Options are joined by "or"; by "and" only in a question without "or" ("out of X and Y")."""
    out = []
    joins = list(_OR.finditer(question)) or list(_JOIN.finditer(question))
    for m in joins:
        right = _END.split(question[m.end():], maxsplit=1)[0]
        items = _END.split(question[:m.start()])
        left = items[1:] if len(items) > 1 else [_LEAD.sub("", items[0])]
        out.append([o.strip() for o in left + [right] if o.strip()])
    return out


def _same(option: str, gold: str) -> bool:
    a, b = set(normalize_answer(option).split()), set(normalize_answer(gold).split())
    return bool(a and b) and (a <= b or b <= a)


def rivals(question: str | None, golds: str | Iterable[str]) -> list[str]:
    """The options a comparison question offers besides the gold ("Who is older, Annie Morton
    or Terry Richardson?" with gold Terry Richardson: ``["Annie Morton"]``)."""
    if not question:
        return []
    golds = gold_list(golds)
    out = []
    for options in _options(question):
        hits = [any(_same(o, g) for g in golds) for o in options]
        if any(hits):
            out += [o for o, hit in zip(options, hits) if not hit]
    return out


def _rival_tokens(rival: str, golds: list[str]) -> set[str]:
    gold_tokens = {t for g in golds for t in normalize_answer(g).split()}
    return set(normalize_answer(rival).split()) - gold_tokens - _STOP


def _scored(metric, prediction: str | None, golds: str | Iterable[str],
            question: str | None = None) -> float:
    """``metric`` of the prediction, a candidate list scoring as its worst candidate; on a
    comparison ``question``, an answer naming another option scores as that option too."""
    if prediction is None:
        return 0.0
    golds = gold_list(golds)
    pred = normalize_answer(prediction)
    options = rivals(question, golds)
    parts = candidates(prediction, golds + options)  # an option is compared whole, like a gold
    named = [r for r in options if _rival_tokens(r, golds) & set(pred.split())]
    if any(pred == normalize_answer(g) for g in golds) and not named:
        return 1.0
    return min(max(metric(normalize_answer(c), normalize_answer(g)) for g in golds)
               for c in parts + named)


def exact_match(prediction: str | None, golds: str | Iterable[str],
                question: str | None = None) -> float:
    """1.0 if the normalised prediction equals any normalised gold (or lists only
    candidates that each do), else 0.0.  ``question``: see ``rivals``."""
    return _scored(lambda p, g: float(p == g), prediction, golds, question)


def f1(prediction: str | None, golds: str | Iterable[str], question: str | None = None) -> float:
    """Best token-level F1 between the normalised prediction and any gold (HotpotQA rules); a
    candidate list scores as its worst candidate.  ``question``: see ``rivals``."""
    return _scored(_f1_one, prediction, golds, question)


def _f1_one(pred: str, gold: str) -> float:
    if (pred in _SPECIAL or gold in _SPECIAL) and pred != gold:
        return 0.0
    pred_tokens, gold_tokens = pred.split(), gold.split()
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


class QAReward(Reward):
    """Outcome reward of a QA episode: ``metric`` (``em`` or ``f1``) of the answer.

    Components (all logged): ``em``, ``f1``, ``correct`` (= ``em``) and ``has_answer`` (1 if the
    policy gave an answer); the last two are the names every reward shares, which trainers
    read for accuracy and void masking.  The answer is the protocol's
    (``SearchR1Protocol.answer``: the last ``<answer>`` of the final action).
    """

    def __init__(self, metric: str = "em"):
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
        self.metric = metric

    def score(self, task: "Task", trajectory: "Trajectory | None",
              answer: str | None) -> RewardResult:
        golds = gold_list(task.answer)
        em = exact_match(answer, golds, task.question)
        scores = {"em": em, "f1": f1(answer, golds, task.question), "correct": em,
                  "has_answer": float(answer is not None)}
        return RewardResult(scores[self.metric], scores, correct=bool(em),
                            answered=answer is not None)
