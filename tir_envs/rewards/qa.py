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
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from tir_envs.rewards.base import Reward, RewardResult

if TYPE_CHECKING:
    from tir_envs.task import Task
    from tir_envs.trajectory import Trajectory

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = frozenset(string.punctuation)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
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
    "comma": re.compile(r",(?!\d{3}(?!\d))(?<!\b\d,(?=\s*\d{4}\b))(?<!\b\d\d,(?=\s*\d{4}\b))"),
    "slash": re.compile(r"(?<!\d)\s*/\s*(?!\d)|\s+/\s+"),
    "semicolon": re.compile(r";"),
    "pipe": re.compile(r"\|"),
    "line": re.compile(r"\n"),
}


def candidates(prediction: str, golds: str | Iterable[str]) -> list[str]:
    """The candidates ``prediction`` lists, by the separators no gold alias contains (see the
    module docstring); ``[prediction]`` when it names one."""
    golds = gold_list(golds)
    parts = [prediction]
    for kind, separator in _SEPARATORS.items():
        if any(separator.search(g) for g in golds):
            continue
        parts = [piece for part in parts for piece in separator.split(part)]
    parts = [p.strip() for p in parts if normalize_answer(p)]
    return parts if len(parts) > 1 else [prediction]


def _scored(metric, prediction: str | None, golds: str | Iterable[str]) -> float:
    """``metric`` of the prediction, a candidate list scoring as its worst candidate."""
    if prediction is None:
        return 0.0
    golds = gold_list(golds)
    pred = normalize_answer(prediction)
    if any(pred == normalize_answer(g) for g in golds):
        return 1.0
    return min(max(metric(normalize_answer(c), normalize_answer(g)) for g in golds)
               for c in candidates(prediction, golds))


def exact_match(prediction: str | None, golds: str | Iterable[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold (or lists only
    candidates that each do), else 0.0."""
    return _scored(lambda p, g: float(p == g), prediction, golds)


def f1(prediction: str | None, golds: str | Iterable[str]) -> float:
    """Best token-level F1 between the normalised prediction and any gold (HotpotQA rules); a
    candidate list scores as its worst candidate."""
    return _scored(_f1_one, prediction, golds)


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


def extract_answer(text: str) -> str | None:
    """The body of the last complete ``<answer>…</answer>`` in ``text`` (stripped), if any.

    The last, as Search-R1 grades (its ``extract_solution`` keeps the last match): the one rule
    the Search-R1 protocol and ``QAReward.read_answer`` both apply."""
    found = _ANSWER.findall(text)
    return found[-1].strip() if found else None


class QAReward(Reward):
    """Outcome reward of a QA episode: ``metric`` (``em`` or ``f1``) of the answer.

    Components (all logged): ``em``, ``f1``, ``correct`` (= ``em``) and ``has_answer`` (1 if the
    policy gave an answer); the last two are the names every reward shares, which trainers
    read for accuracy and void masking.  In an env the answer is the protocol's
    (``SearchR1Protocol.answer``: the last ``<answer>`` of the final action); offline,
    ``read_answer`` reads the same from ``actions[-1]``, the policy's own last turn.
    """

    def __init__(self, metric: str = "em"):
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
        self.metric = metric

    def read_answer(self, task: "Task", actions: Sequence[str]) -> str | None:
        return extract_answer(actions[-1]) if actions else None

    def score(self, task: "Task", trajectory: "Trajectory | None",
              answer: str | None) -> RewardResult:
        golds = gold_list(task.answer)
        em = exact_match(answer, golds)
        scores = {"em": em, "f1": f1(answer, golds), "correct": em,
                  "has_answer": float(answer is not None)}
        return RewardResult(scores[self.metric], scores, correct=bool(em),
                            answered=answer is not None, answer=answer)
