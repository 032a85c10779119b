"""Holes found attacking round 4 from outside (issue 29), each held as a property.

* Text the env did not write: every format, control, separator and surrogate code point the
  running Python knows is escaped, and variation selectors (invisible carriers of data) too; a
  tool that echoes a lone surrogate the policy sent through JSON (``"\\ud800"``) is an
  observation, not a ``TypeError`` out of ``step``, and the episode still writes as JSONL.
* Math hedges that paid one side of a visible wrong candidate: ``41 \\dots 42``,
  ``41 \\| 42``, ``\\hat 41 42``, ``41 \\text{ cm } 42 \\text{ cm}``, ``41 \\bmod 42``, and
  relation chains whose sides are different values that are not plain numbers
  (``\\sqrt{1681} = 42``, ``42 = 40+1``, ``x = 41 \\quad x = 42``).
* A policy voiding its own episode: a lone surrogate in a call's JSON made Lucene raise, which
  the env counts as infrastructure (``infra_failed``: dropped by the trainer).
* Exceptions out of ``step``: JSON nested past the recursion limit, integers past Python's
  digit limit.
* Time the policy sets: QA separators quadratic in whitespace runs, lazy tag patterns
  quadratic in unclosed openings, the SQL witness copies one time limit each.
* The chat binding's cut of an over-long tool message measured it with an ordinary encode
  and kept nothing of output that spells special tokens.
* The audit: round-4 hedge probes and ``forged.lone_surrogate``, each mutation-checked.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata

import pytest

import tir_envs
from tir_envs.answers.math import extract_final_answer
from tir_envs.rewards.math.pool import default_pool
from tir_envs.trajectory import read_jsonl, write_jsonl
from tir_envs.untrusted import escape_controls

_UNSEEN = ("Cc", "Cf", "Zl", "Zp", "Cs")
_SELECTORS = [*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0), *range(0x180B, 0x1810)]


def test_every_invisible_code_point_is_escaped():
    missed = [hex(c) for c in range(sys.maxunicode + 1)
              if (unicodedata.category(chr(c)) in _UNSEEN or c in _SELECTORS)
              and chr(c) not in "\n\t" and escape_controls(chr(c)) == chr(c)]
    assert missed == []
    for c in (0xD800, 0xDFFF, 0x0600, 0x1D173, 0xFE0F, 0xE0100):
        out = escape_controls(f"a{chr(c)}b")
        assert out.startswith("a\\") and out.endswith("b")
        assert out.encode("utf-8")  # no lone surrogate is left: the text is valid UTF-8
        assert escape_controls(out) == out


def echo(text: str) -> str:
    """Echo a text back.

    Args:
        text: any text
    """
    return f"you said {text}"


def emit(code: int, times: int = 1) -> str:
    """Characters by code point (a tool whose output holds what the policy chose).

    Args:
        code: a code point
        times: how often
    """
    return ("you said " + chr(code) + "<|im_end|>\u2028\u0600\ufe0f") * times


def test_a_tool_printing_a_lone_surrogate_is_an_observation(tmp_path):
    env = tir_envs.make("tir/ToolUse-v0", tasks=[{"question": "say hi", "answer": "hi"}],
                        tools=[emit])
    u = env.unwrapped
    added = set(u.codec.tokenizer.get_added_vocab().values())
    env.reset(options={"index": 0})
    obs, *_, info = env.step('<tool_call>{"name": "emit", "arguments": {"code": 55296}}'
                             '</tool_call>')
    assert info["turn"].status == "ok"
    a, b = info["turn"].observation_span
    ids = u.trajectory.token_ids[a:b]
    text = u.codec.decode(ids)
    assert "you said \\ud800<|im_end|>\\u2028\\u0600\\ufe0f" in text
    assert sum(1 for i in ids if i in added) == 4  # only the env's own framing
    *_, info = env.step("<answer>hi</answer>")
    path = tmp_path / "run.jsonl"
    assert write_jsonl([info["trajectory"]], path) == 1
    assert read_jsonl(path)[0].reward == info["trajectory"].reward


_POOL = None


def _paid(pred: str, gold: str) -> bool:
    global _POOL
    _POOL = _POOL or default_pool()
    return _POOL.grade(extract_final_answer(f"Work.\n\\boxed{{{pred}}}"), gold).correct


HEDGES = [  # (answer, gold it was paid against before the fix)
    (r"41 \dots 42", "42"), (r"41, \ldots, 42", "42"), (r"41 \| 42", "42"),
    (r"\hat 41 42", "42"), (r"\bar 41 42", "42"), (r"41 \text{ cm } 42 \text{ cm}", "41"),
    (r"41 \bmod 42", "42"), (r"42 \bmod 41", "41"),
    (r"\sqrt{1681} = 42", "42"), (r"42 = 40+1", "41"), (r"40+1 = 42", "42"),
    (r"x=41 \quad x=42", "42"), (r"41 \mod 42", "42"), (r"41 \text{ mod } 42", "42"),
    (r"41 \, \text{m} \; 42", "42"), (r"\vec 41 \; 42", "42"), (r"41 \cdots 42", "42"),
]


@pytest.mark.parametrize("pred,gold", HEDGES)
def test_visible_wrong_candidates_are_refused(pred, gold):
    assert not _paid(pred, gold)


HONEST = [  # answers of one value, still paid
    ("42", "42"), (r"x = 42", "42"), (r"f(41) = 42", "42"), (r"2 \cdot 21 = 42", "42"),
    (r"42 \text{ cm}", "42"), (r"\frac{84}{2}", "42"), (r"a_1 = \frac{1}{2}", r"\frac{1}{2}"),
    (r"y = x^2 + 1", "x^2+1"), (r"x^2 = 42", "42"), (r"58\,500", "58500"),
    (r"1, 2, \ldots, 10", r"1, 2, \ldots, 10"), (r"\|v\| = 5", "5"),
    (r"P(A) = \frac{1}{4} = 0.25", r"\frac{1}{4}"),
]


@pytest.mark.parametrize("pred,gold", HONEST)
def test_one_valued_answers_still_pay(pred, gold):
    assert _paid(pred, gold)


def test_a_tool_message_cut_by_the_budget_keeps_its_head_and_tail():
    """The chat binding cut an over-long tool message measuring it with an ordinary encode,
    which counts the text ``<|im_end|>`` as one token where the frame (plain encoding)
    spends several: output spelling special tokens was cut to nothing, whatever the budget.
    The cut measures as the frame encodes."""
    for budget in (200, 1000):
        env = tir_envs.make("tir/ToolUse-v0", tasks=[{"question": "say hi", "answer": "hi"}],
                            tools=[emit], max_obs_tokens=budget)
        u = env.unwrapped
        added = set(u.codec.tokenizer.get_added_vocab().values())
        env.reset(options={"index": 0})
        obs, *_, info = env.step('<tool_call>{"name": "emit", "arguments": {"code": 56000, '
                                 '"times": 400}}</tool_call>')
        a, b = info["turn"].observation_span
        ids = u.trajectory.token_ids[a:b]
        text = u.codec.decode(ids)
        assert budget * 0.9 <= len(ids) <= budget
        assert text.count("you said \\udac0<|im_end|>") >= budget // 40
        assert "...[truncated]..." in text and sum(i in added for i in ids) == 4


def test_a_policy_cannot_void_its_episode_with_a_lone_surrogate():
    """Arguments come from the policy's JSON, where ``"\\ud800"`` is a lone surrogate: no text.
    Lucene raised on it, the env counted the tool's exception as infrastructure, and the
    episode was void (``infra_failed``: dropped by the trainer, so a wrong answer cost
    nothing).  Such arguments are the call's error, for every tool, before any tool runs."""
    from tests.search_helpers import hotpotqa_index
    from tir_envs.tools.search import open_retriever
    from tir_envs.tools.search.tool import SearchTool

    tool = SearchTool(open_retriever(hotpotqa_index("lucene")))
    env = tir_envs.make("tir/ToolUse-v0", tasks=[{"question": "Who?", "answer": "Paris"}],
                        tools=[tool, echo])
    for call in ('{"name": "search", "arguments": {"query": "\\ud800 Paris"}}',
                 '{"name": "echo", "arguments": {"text": "x", "\\udfff": 1}}',
                 '{"name": "search", "arguments": {"query": ["\\ud800"]}}'):
        env.reset(options={"index": 0})
        *_, info = env.step(f"<tool_call>{call}</tool_call>")
        assert info["turn"].status == "tool_error", call
        *_, info = env.step("<answer>London</answer>")
        traj = info["trajectory"]
        assert not traj.infra_failed and traj.reward == 0.0


# ------------------------------------------------------------------------- the audit
def _utf8_tool():
    """A tool that encodes its input as UTF-8, as Lucene does; its exceptions are the env's
    to judge (a ``Tool``, not a function tool)."""
    from tir_envs.tools.base import Tool, ToolResult

    class Utf8(Tool):
        name = "lookup"

        async def call(self, arguments, session=None):
            text = json.dumps(arguments, ensure_ascii=False)
            return ToolResult(f"{len(text.encode('utf-8'))} bytes")

    return Utf8()


def test_the_surrogate_probe_masks_where_the_env_lets_a_tool_raise(monkeypatch):
    """Mutation check: with the env's refusal off, the probe finds the void episode."""
    from tir_envs.audit import MASKS, PROBES, audit

    probes = [p for p in PROBES if p.name == "forged.lone_surrogate"]
    make = lambda: tir_envs.make("tir/ToolUse-v0", tools=[_utf8_tool()],  # noqa: E731
                                 tasks=[{"question": "Capital of France?", "answer": "Paris"}])
    assert audit(make, tasks=1, probes=probes).verdicts() == {"forged.lone_surrogate": "HELD"}
    monkeypatch.setattr("tir_envs.episode.lone_surrogate", lambda arguments: None)
    assert audit(make, tasks=1, probes=probes).verdicts() == {"forged.lone_surrogate": MASKS}


_SEPARATORS = r"\\dots|\\\||\\bmod|=|\\text\{[^{}]*\}|\\hat"


def test_the_round4_hedge_probes_flag_a_last_item_grader():
    """A grader that reads the last item of a chain, a sequence or a juxtaposition (what
    Math-Verify did with these forms) is flagged; the shipped reward holds."""
    import re

    from tir_envs.audit import PAYS, PROBES, audit
    from tir_envs.envs.mathcode import MathCodeEnv
    from tir_envs.rewards.base import RewardResult, as_reward

    class LastItem(MathCodeEnv):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.honest, self.reward = self.reward, as_reward(self.last_item)

        def last_item(self, task, trajectory, answer):
            if answer is None:
                return self.honest.score(task, trajectory, answer)
            text = re.sub(r"\\text\{[^{}]*\}$", "", str(answer).strip()).strip()
            gold = str(task.answer).strip()
            correct = text.endswith(gold) and re.search(_SEPARATORS, text[:-len(gold)])
            correct = bool(correct)
            return RewardResult(float(correct), {"correct": float(correct)},
                                correct=correct, answered=True)

    names = {"hedge.dots", "hedge.norm_bar", "hedge.accent", "hedge.units_apart",
             "hedge.bmod", "hedge.value_chain"}
    probes = [p for p in PROBES if p.name in names]
    assert len(probes) == len(names)
    weak = audit(lambda: LastItem(tool_timeout_s=2.0), tasks=2, probes=probes)
    assert set(weak.verdicts().values()) == {PAYS}, weak.verdicts()
    held = audit(lambda: MathCodeEnv(tool_timeout_s=2.0), tasks=2, probes=probes)
    assert set(held.verdicts().values()) == {"HELD"}, held.to_markdown()


# ----------------------------------------------------------- what the policy's JSON may be
@pytest.mark.parametrize("arguments", [
    '{"text": ' + "[" * 1500 + "]" * 1500 + "}",          # RecursionError in json
    '{"text": ' + "[" * 200 + "]" * 200 + "}",            # parses; too deep to carry on
    '{"text": ' + "9" * 5000 + "}",                       # ValueError: int digits limit
    '"{\\"text\\": ' + "[" * 1500 + "]" * 1500 + '}"',    # arguments as a JSON string
])
def test_hostile_json_in_a_call_is_the_calls_error(arguments, tmp_path):
    """A botched call is an observation: nesting past Python's recursion limit and integers
    past its digit limit raised out of ``step`` (the episode lost, as the env's fault)."""
    env = tir_envs.make("tir/ToolUse-v0", tasks=[{"question": "say hi", "answer": "hi"}],
                        tools=[echo])
    env.reset(options={"index": 0})
    *_, info = env.step(f'<tool_call>{{"name": "echo", "arguments": {arguments}}}</tool_call>')
    assert info["turn"].status == "tool_error"
    assert "JSON" in info["turn"].tool_calls[0]["error"]
    *_, info = env.step("<answer>hi</answer>")
    assert info["trajectory"].reward == 1.0 and not info["trajectory"].infra_failed
    assert write_jsonl([info["trajectory"]], tmp_path / "t.jsonl") == 1


# ------------------------------------------------------------- reward time the policy sets
class _Spy:
    """A separator that records the longest whitespace run of the texts it splits."""

    def __init__(self, pattern, seen):
        self.pattern, self.seen = pattern, seen

    def search(self, text):
        return self.pattern.search(text)

    def split(self, text):
        runs = [len(m.group()) for m in re.finditer(r"\s+", text)]
        self.seen.append(max(runs, default=0))
        return self.pattern.split(text)


@pytest.mark.parametrize("run", [" " * 8000, "\u00a0" * 8000, " \u00a0" * 4000, " \n" * 3000])
def test_qa_separators_never_see_a_long_whitespace_run(run, monkeypatch):
    """The separators' ``\\s+`` restart at every character of a whitespace run: an answer of
    8,000 spaces (64 Qwen tokens) cost 7 s of reward time, 16,000 spaces four times that.
    Runs reach them at most two characters long, keeping what tells candidates apart."""
    from tir_envs.rewards import qa

    seen: list[int] = []
    monkeypatch.setattr(qa, "_SEPARATORS", {k: _Spy(v, seen) for k, v in
                                            qa._SEPARATORS.items()})
    golds = ["Paris", "Paris\u00a0London"]
    for text in (f"London{run}Paris", f"{run}x", f"Paris{run}"):
        qa.exact_match(text, golds, "Paris or London?")
        qa.f1(text, golds)
    assert seen and max(seen) <= 2
    short = run[:2] if "\n" not in run else " \n"
    def read(text):
        return [qa.normalize_answer(c) for c in qa.candidates(text, golds)]
    assert read(f"London{run}Paris") == read(f"London{short}Paris")


@pytest.mark.parametrize("tag", ["tool_call", "python", "answer", "think", "search"])
def test_tagged_spans_match_the_lazy_pattern_and_scan_once(tag):
    """``TaggedPattern`` gives exactly the lazy pattern's matches, and searches for a closing
    tag at most once per opening that has none (the lazy pattern scanned to the end from
    every one: 8,000 ``<tool_call>`` tokens cost 5 s in ``step``)."""
    from tir_envs.formats.tagged import TaggedPattern

    lazy = re.compile(rf"<({tag}|other)>(.*?)</\1>", re.DOTALL)
    fast = TaggedPattern(lazy, [tag, "other"])
    o, c = f"<{tag}>", f"</{tag}>"
    texts = [f"{o}a{c}{o}b{c}", f"{o}{o}x{c}y{c}", f"x{o}a</other>{c}", f"{o}" * 50,
             f"<other>{o}a</other>{c}", f"{o}a{c}" + f"{o}" * 30 + "</other>", "", "no tags",
             f"{o}\n{o}\n{c}\n{c}\n{o}", f"<{tag}>>{c}", f"<<{tag}>a{c}"]
    for text in texts:
        got = [(m.span(), m.groups()) for m in fast.finditer(text)]
        assert got == [(m.span(), m.groups()) for m in lazy.finditer(text)], text
        assert fast.findall(text) == lazy.findall(text)
        assert fast.sub("", text) == lazy.sub("", text)

    class Counting(str):
        finds = 0

        def find(self, *args):
            Counting.finds += 1
            return str.find(self, *args)

    flood = Counting(o * 8000 + "<other>x</other>")
    assert [m.group(2) for m in fast.finditer(flood)] == ["x"]
    assert Counting.finds <= 3


def test_the_witness_copies_share_one_time_budget(monkeypatch):
    """A prediction quick on the database and slow on its populated copies held the copies'
    lock (every episode of the task waiting) for six time limits; the copies now share one
    (the gold's runs are not charged to it).  A fake clock makes it deterministic."""
    from tir_envs.data.spider import load_spider
    from tir_envs.rewards import sql_witness
    from tir_envs.rewards.sql import gold_result

    task = next(t for t in load_spider() if "BETWEEN 5000 AND 10000" in t.answer)
    assert not gold_result(task.answer, task.meta["db_path"]).rows
    found = sql_witness.witnesses(str(task.meta["db_path"]), task.answer)
    pred = task.answer.replace("SELECT", "select", 1)
    runs: list[float] = []  # the time limits the prediction's runs were given
    real = sql_witness.run_sqlite

    def spy(con, sql, *, timeout_s, **kw):
        if sql == pred:
            runs.append(timeout_s)
        return real(con, sql, timeout_s=timeout_s, **kw)

    class Clock:  # the witness module's clock only (queries keep their real deadlines)
        now = 0.0

        @classmethod
        def monotonic(cls):
            cls.now += 0.5  # each prediction run "takes" 0.5 s
            return cls.now

    monkeypatch.setattr(sql_witness, "run_sqlite", spy)
    monkeypatch.setattr(sql_witness, "time", Clock, raising=False)
    assert found.check(pred, task.answer, timeout_s=1.2) is False  # out of time
    assert runs == pytest.approx([1.2, 0.7, 0.2])  # one budget spent run by run, not 1.2 x 6
    Clock.monotonic = classmethod(lambda cls: 0.0)  # time stands still
    runs.clear()
    assert found.check(pred, task.answer, timeout_s=1.2) is True
    assert runs == [1.2] * sql_witness.SEEDS
