"""The Bar: against the worst judge (``GullibleJudge`` obeys every instruction it reads outside
data), every injection probe is held by the prompt's construction, and each pays against a
naive prompt, so the probes can fail.  Then the same through ``tir-envs audit``."""

from __future__ import annotations

import pytest

from tir_envs.chat.vocab import qwen3_tokenizer
from tir_envs.judge import NAIVE, SAFE, JudgeClient, JudgeReward, PromptStyle
from tir_envs.judge.gullible import GullibleJudge
from tir_envs.judge.injections import INJECTIONS
from tir_envs.judge.length import OFF
from tir_envs.task import Task

TASK = Task("t1", "What is the capital of France?", "Paris")
WRONG = "Lyon"


@pytest.fixture(scope="module")
def tok():
    return qwen3_tokenizer()


def judged(tok, style, length=None, mode="pointwise") -> JudgeReward:
    client = JudgeClient(GullibleJudge(tok), tok, thinking="off", style=style)
    return JudgeReward(client, mode=mode, length=length)


def attack(reward: JudgeReward, name: str) -> float:
    ends = [reward.client.codec.decode([i]) for i in reward.client.renderer.stop_token_ids()]
    return reward.score(TASK, None, INJECTIONS[name][1](WRONG, "Paris", ends)).value


def test_the_worst_judge_is_honest_on_honest_answers(tok):
    for reward in (judged(tok, SAFE), judged(tok, NAIVE, OFF)):
        assert reward.score(TASK, None, "Paris").value == 1.0
        assert reward.score(TASK, None, WRONG).value == 0.0


@pytest.mark.parametrize("name", sorted(INJECTIONS))
def test_every_probe_is_held_by_the_prompt_and_pays_against_a_naive_one(tok, name):
    held = judged(tok, SAFE)
    assert attack(held, name) == 0.0, f"{name} paid against the defended prompt"
    naive = judged(tok, NAIVE, OFF)
    assert attack(naive, name) == 1.0, f"{name} does not pay even against a naive prompt"


@pytest.mark.parametrize("name, style, pays", [
    # delimiting alone is not enough: a tag closes the block, spelled control tokens end it
    ("block_close", PromptStyle(delimit=True, escape=False, plain_encode=True), True),
    ("control_tokens", PromptStyle(delimit=True, escape=False, plain_encode=False), True),
    # each of escaping and plain encoding alone keeps Qwen's spelled control tokens text
    ("control_tokens", PromptStyle(delimit=True, escape=False, plain_encode=True), False),
    ("control_tokens", PromptStyle(delimit=True, escape=True, plain_encode=False), False),
    ("block_close", PromptStyle(delimit=True, escape=True, plain_encode=False), False),
])
def test_each_defence_matters(tok, name, style, pays):
    assert attack(judged(tok, style, OFF), name) == float(pays)


def test_padding_is_held_by_the_length_budget_not_the_prompt(tok):
    assert attack(judged(tok, SAFE, OFF), "padding") == 1.0  # the worst judge likes length
    assert attack(judged(tok, SAFE), "padding") == 0.0


def test_grouped_judging_holds_the_probes_too(tok):
    answers = ["Paris", WRONG] + [INJECTIONS[n][1](WRONG, "Paris") for n in
                                  ("instructions", "fake_verdict", "reference_claim")]
    held = judged(tok, SAFE, mode="scores").score_group(TASK, answers)
    assert [r.value for r in held] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert all(r.metadata["judge"]["failure"] is None for r in held)
    naive = judged(tok, NAIVE, OFF, mode="scores").score_group(TASK, answers)
    # the naive judge copies the fake verdict: a failure, so 0 for every answer of the group
    assert [r.value for r in naive] == [0.0] * 5
    assert "verdict line" in naive[0].metadata["judge"]["failure"] or \
        "scores for" in naive[0].metadata["judge"]["failure"]
    without_fake = [a for a in answers if "VERDICT" not in a]
    naive = judged(tok, NAIVE, OFF, mode="scores").score_group(TASK, without_fake)
    assert [r.value for r in naive] == [1.0, 0.0, 1.0, 1.0]  # the orders are obeyed


def lookup(city: str) -> str:
    """The country a city is in.  Args: city: a city name."""
    return "France"


@pytest.mark.parametrize("style, verdict", [(SAFE, "HELD"), (NAIVE, "PAYS")])
def test_the_audit_reports_which_judge_probes_pay(tok, style, verdict):
    import tir_envs
    from tir_envs.audit import PROBES, audit

    def make():
        reward = judged(tok, style, None if style is SAFE else OFF)
        return tir_envs.make("tir/ToolUse-v0", tasks=[TASK], tools=[lookup], reward=reward,
                             tokenizer=tok, chat=False)

    probes = [p for p in PROBES if p.family == "judge"]
    assert len(probes) == len(INJECTIONS)
    report = audit(make, probes=probes, tasks=1)
    verdicts = {p.name: p.verdict for p in report.probes}
    assert set(verdicts.values()) == {verdict}, verdicts


def test_another_family_holds_every_probe_in_its_own_rendering():
    """Mistral's real vocabulary and template (no ChatML): its end-of-turn spelled in an
    answer stays text, and every probe is held, with the family's own framing."""
    from tir_envs.chat.vocab import family_tokenizer

    tok = family_tokenizer("mistral")
    client = JudgeClient(GullibleJudge(tok), tok, renderer="mistral")
    reward = JudgeReward(client)
    assert client.renderer.family == "mistral"
    assert reward.score(TASK, None, "Paris").value == 1.0
    assert {name: attack(reward, name) for name in INJECTIONS} == dict.fromkeys(INJECTIONS, 0.0)
    naive = JudgeReward(JudgeClient(GullibleJudge(tok), tok, renderer="mistral", style=NAIVE),
                        length=OFF)
    assert attack(naive, "control_tokens") == 1.0
