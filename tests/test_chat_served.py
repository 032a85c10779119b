"""Evaluating a model as it will be served (``tir_envs.chat.served``, ``bench --as-served``).

The policy is given each turn's conversation re-rendered by the family's template; the env's
ledger is unchanged; the drift between the two is recorded and reported.  References are built
here: PyPI ``renderers``' Qwen3 renderer with its template-faithful reasoning retention, over
the conversation written out in the test (not read from the env).
"""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("renderers")

import renderers  # noqa: E402
from renderers import configs  # noqa: E402

import tir_envs  # noqa: E402
from tir_envs.bench import run  # noqa: E402
from tir_envs.bench.oracle import oracle  # noqa: E402
from tir_envs.bench.store import RunFolderError  # noqa: E402
from tests.search_helpers import small_index  # noqa: E402
from tir_envs.chat.served import drift, served_prompt  # noqa: E402
from tir_envs.chat.vocab import family_tokenizer  # noqa: E402
from tir_envs.rollout import EpisodeRunner, Generation, SamplingParams  # noqa: E402
from tir_envs.rollout.stops import cut_at_stop  # noqa: E402
from tir_envs.task import Task  # noqa: E402

MATH = Task("m", "What is 6 * 7?", "42", {})
QA = Task("q", "Which city is the capital of France?", ["Paris"], {})


@pytest.fixture(scope="module")
def tok():
    return family_tokenizer("qwen3")


def call(name: str, args: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def think(text: str, canonical: bool) -> str:
    """A reasoning block as the template re-renders it (``canonical``) or as sampled tersely."""
    return f"<think>\n{text}\n</think>\n\n" if canonical else f"<think>{text}</think>\n"


class Turns:
    """Writes its turns in order whatever the prompt holds (a scripted policy that looked its
    turn up in the context would lose its place once the context is re-rendered); records
    every prompt it was given."""

    def __init__(self, tok, turns):
        self.tok, self.turns, self.prompts = tok, list(turns), []

    async def generate(self, prompt_ids, stop, sampling):
        self.prompts.append(list(prompt_ids))
        text = self.turns[len(self.prompts) - 1] if len(self.prompts) <= len(self.turns) else ""
        ids = self.tok.encode(text, add_special_tokens=False)
        decode = lambda i: self.tok.decode(i, skip_special_tokens=False)  # noqa: E731
        cut = cut_at_stop(ids, decode, stop, sampling.stop_token_ids, sampling.max_tokens)
        ids = ids[:cut.length]
        return Generation(ids, [-0.1] * len(ids), cut.finish_reason)


def play(make, policy, task, view=served_prompt):
    async def go():
        runner = EpisodeRunner(make, prompt_view=view)
        try:
            return await runner.run(policy, options={"task": task},
                                    sampling=SamplingParams(max_tokens=512))
        finally:
            await runner.aclose()
    return asyncio.run(go())


def qwen3_reference(tok, messages, tools=None):
    r = renderers.create_renderer(tok, configs.Qwen3RendererConfig(enable_thinking=True))
    return list(r.render_ids(messages, tools=tools, add_generation_prompt=True))


def rite(tok):
    return lambda: tir_envs.make("tir/MathCode-v0", protocol="rite", tasks=[MATH], tokenizer=tok,
                                 thinking="on")


@pytest.mark.parametrize("canonical", [True, False])
def test_rite_as_served_is_the_template_render(tok, canonical):
    """Qwen3 keeps reasoning after the last user query (tool results are not queries) but
    re-spaces it: a terse block drifts by a few tokens, a canonical one not at all."""
    turns = [think("Multiply.", canonical) + call("python", {"code": "print(6 * 7)"})
             + "<|im_end|>",
             think("42.", canonical) + call("answer", {"answer": "\\boxed{42}"}) + "<|im_end|>"]
    policy = Turns(tok, turns)
    traj = play(rite(tok), policy, MATH)
    assert traj.correct and traj.reward == 2.0
    env = tir_envs.make("tir/MathCode-v0", protocol="rite", tasks=[MATH], tokenizer=tok)
    messages = env.unwrapped.protocol.prompt(MATH, True)
    tools = env.unwrapped.protocol.tool_schemas()
    env.close()
    conversation = [*messages, {"role": "assistant", "content": turns[0][:-len("<|im_end|>")]},
                    {"role": "tool", "content": "42", "name": "python"}]
    assert policy.prompts[0] == traj.prompt_ids == qwen3_reference(tok, messages, tools)
    assert policy.prompts[1] == qwen3_reference(tok, conversation, tools)
    ledger = traj.prompt_ids + traj.token_ids[:traj.turns[1].action_span[0]]
    served = traj.metadata["served"]
    assert [t["ledger_tokens"] for t in served["turns"]] == [len(traj.prompt_ids), len(ledger)]
    if canonical:
        assert policy.prompts[1] == ledger and served["drift_tokens"] == 0
    else:
        a, b = drift(ledger, policy.prompts[1])
        assert a > 0 and b > 0 and served["turns"][1]["ledger_only"] == a
        assert served["drift_tokens"] == a + b and served["drifted_turns"] == 1


def test_user_observations_drop_earlier_reasoning(tok):
    """With observations as user turns every observation is a new query: the template drops
    the reasoning of every earlier turn; the ledger keeps it, and the drift says how much."""
    make = lambda: tir_envs.make(  # noqa: E731
        "tir/Search-v0", retriever=str(small_index("bm25")), tasks=[QA], tokenizer=tok,
        thinking="on", observation_role="user")
    policy = Turns(tok, [think("I should look this up in detail.", True)
                         + "<search> capital of France </search>",
                         think("Paris it is.", True) + "<answer> Paris </answer>"])
    traj = play(make, policy, QA)
    assert traj.correct
    decoded = [tok.decode(p, skip_special_tokens=False) for p in policy.prompts]
    ledger = tok.decode(traj.prompt_ids + traj.token_ids, skip_special_tokens=False)
    assert "look this up in detail" in ledger and "look this up in detail" not in decoded[1]
    assert "<search> capital of France </search>" in decoded[1]  # the call's text is kept
    served = traj.metadata["served"]
    assert served["turns"][1]["ledger_only"] >= len(tok.encode("I should look this up in detail."))
    assert served["drifted_turns"] == 1


def test_what_cannot_be_served_is_refused_by_name(tok):
    raw = lambda: tir_envs.make("tir/MathCode-v0", protocol="torl", tasks=[MATH])  # noqa: E731
    in_turn = lambda: tir_envs.make(  # noqa: E731
        "tir/Search-v0", retriever=str(small_index("bm25")), tasks=[QA], tokenizer=tok)
    for make, words in ((raw, "raw text"), (in_turn, "observation_role")):
        traj = play(make, Turns(tok, ["x"]), QA if make is in_turn else MATH)
        assert traj.infra_failed and words in traj.failure.message


# ---------------------------------------------------------------- bench --as-served
class TwoTurns:
    """A job-aware policy for the bench: a python call with a terse reasoning block, then the
    item's gold answer; its turn is the number of assistant turns in the prompt."""

    def __init__(self, tok):
        self.tok = tok

    async def generate_job(self, job, prompt_ids, stop, sampling):
        context = self.tok.decode(prompt_ids, skip_special_tokens=False)
        turn = context.count("<|im_start|>assistant") - 1  # the last one: the opener
        text = (think("Check.", False) + call("python", {"code": "print(1)"}) if turn == 0 else
                think("Done.", False) + call("answer", {"answer": f"\\boxed{{{job.task.answer}}}"}))
        ids = self.tok.encode(text + "<|im_end|>", add_special_tokens=False)
        return Generation(ids, [-0.1] * len(ids), "stop")

    async def generate(self, prompt_ids, stop, sampling):
        raise TypeError("runs under the bench harness")


def bench(policy, out, **changes):
    settings = dict(out=out, protocol="rite", tokenizer="family:qwen3", limit=2,
                    env_kwargs={"thinking": "on"}, progress=False, as_served=True)
    return run("aime24", policy, **{**settings, **changes})


def test_bench_as_served_reports_the_drift(tok, tmp_path):
    # the oracle answers in one action: its prompt is the template's render, no drift
    summary = bench(oracle(tokenizer=tok), tmp_path / "oracle")
    d = summary["suites"]["aime24"]["as_served"]
    assert d == {"episodes": 2, "drifted_episodes": 0, "prompts": 2, "drifted_prompts": 0,
                 "drift_tokens": 0, "max_episode_drift_tokens": 0,
                 "mean_episode_drift_tokens": 0.0}
    assert summary["suites"]["aime24"]["parts"]["aime24"]["avg_at_k"] == 1.0
    # two turns, the first with a terse reasoning block the template re-spaces
    summary = bench(TwoTurns(tok), tmp_path / "two")
    d = summary["suites"]["aime24"]["as_served"]
    records = [json.loads(line) for line in (tmp_path / "two" / "samples.jsonl").open()]
    assert all(r["correct"] for r in records)
    assert d["episodes"] == 2 and d["prompts"] == 4 and d["drifted_prompts"] == 2
    assert d["drift_tokens"] == sum(r["served_drift_tokens"] for r in records) > 0
    report = (tmp_path / "two" / "report.md").read_text()
    assert "As served: drift from the ledger" in report and "**as served**" in report
    assert json.loads((tmp_path / "two" / "run.json").read_text())["as_served"] is True
    with pytest.raises(RunFolderError, match="as_served"):  # a folder keeps its setting
        bench(TwoTurns(tok), tmp_path / "two", as_served=False)


def test_bench_as_served_refuses_a_raw_text_env_before_any_sample(tmp_path):
    with pytest.raises(ValueError, match="raw text"):
        run("aime24", oracle(), out=tmp_path, limit=1, progress=False, as_served=True)


def test_mistral_has_no_serving_template_offline():
    pytest.importorskip("mistral_common")
    from tir_envs.chat.served import check_servable

    env = tir_envs.make("tir/MathCode-v0", protocol="rite", tasks=[MATH],
                        tokenizer=family_tokenizer("mistral"))
    try:
        with pytest.raises(ValueError, match="no serving template for the mistral renderer"):
            check_servable(env.unwrapped)
    finally:
        env.close()


def test_the_cli_flag_reaches_the_run(tmp_path, capsys):
    from tir_envs.cli import main

    code = main(["bench", "--suite", "aime24", "--policy", "oracle", "--limit", "1",
                 "--as-served", "--no-progress", "--out", str(tmp_path)])
    assert code != 0 and "raw text" in capsys.readouterr().err


def test_deepseek_r1_as_served_strips_earlier_reasoning():
    """R1's template keeps only the text after ``</think>`` of earlier turns; the ledger (and
    the prompt the env gives) keeps the reasoning the policy sampled."""
    tok = family_tokenizer("deepseek-r1")  # a stand-in: V3's specials on the bundled BPE
    make = lambda: tir_envs.make("tir/MathCode-v0", protocol="rite", tasks=[MATH],  # noqa: E731
                                 tokenizer=tok, renderer="deepseek-r1")
    env = make()
    render = env.unwrapped.protocol.format.renderer.render_calls
    turns = [render([("python", {"code": "print(6 * 7)"})]).replace("I call python.",
                                                                      "Multiply six by seven."),
             render([("answer", {"answer": "\\boxed{42}"})])]
    env.close()
    policy = Turns(tok, turns)
    traj = play(make, policy, MATH)
    assert traj.correct
    ledger = tok.decode(traj.prompt_ids + traj.token_ids, skip_special_tokens=False)
    served = tok.decode(policy.prompts[1], skip_special_tokens=False)
    assert "Multiply six by seven." in ledger and "Multiply six by seven." not in served
    assert traj.metadata["served"]["turns"][1]["ledger_only"] >= len(
        tok.encode("Multiply six by seven.</think>", add_special_tokens=False))
