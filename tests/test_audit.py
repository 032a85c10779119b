"""``tir-envs audit``: every shipped env x protocol holds against the whole battery (real
sandbox, real graders, real BM25 index, real Spider databases), and the probes fail where a
reward is weakened, so a HELD means something."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import gymnasium as gym
import pytest

from tests.search_helpers import small_index
from tests.sql_helpers import CACHE
from tir_envs.audit import MASKS, PAYS, PROBES, audit
from tir_envs.cli import main
from tir_envs.data.spider import load_spider
from tir_envs.env import TIREnv
from tir_envs.envs.mathcode import MathCodeEnv
from tir_envs.formats import TagsFormat, TagSpec
from tir_envs.protocols import Budgets, Protocol
from tir_envs.rewards.base import RewardResult, as_reward
from tir_envs.answers.math import extract_final_answer
from tir_envs.rewards.math.pool import GraderPool
from tir_envs.rewards.sql import SQLReward
from tir_envs.tools.base import Tool, ToolResult, Status

@pytest.fixture(scope="module")
def grader():
    with GraderPool(workers=1, timeout_s=3) as pool:
        yield pool


def assert_held(report) -> None:
    """Every applicable probe HELD (the report's Markdown says which did not, and how)."""
    assert report.ok, report.to_markdown()
    held = sum(v == "HELD" for v in report.verdicts().values())
    assert held >= 25, report.verdicts()  # the battery really ran, probes of every family


def assert_hostile_inputs_held(report) -> None:
    """The shipped tool's hostile inputs ran (their calls ended as results or as the policy's
    own errors) and masked nothing."""
    probe = next(p.to_dict() for p in report.probes if p.name == "mask.hostile_inputs")
    assert probe["verdict"] == "HELD", probe
    assert set(probe["statuses"]) & {"ok", "tool_error"}, probe  # calls ran


@pytest.mark.parametrize("protocol", ["torl", "zerotir", "rite"])
def test_mathcode_holds(protocol, grader, tmp_path):
    report = audit("tir/MathCode-v0", protocol=protocol, tasks=2, out=tmp_path,
                   env_kwargs={"tool_timeout_s": 1.0, "grader": grader})
    assert_held(report)
    assert report.verdicts()["forged.time"] == "HELD"  # python probes applied
    assert report.verdicts()["forged.frames"] == "HELD"  # no frame yields infra_error
    assert_hostile_inputs_held(report)
    written = json.loads((tmp_path / "audit.json").read_text())
    assert written["env"] == "tir/MathCode-v0" and len(written["probes"]) == len(PROBES)
    assert (tmp_path / "audit.md").read_text().startswith("# Reward-hacking audit")


def test_search_holds():
    report = audit("tir/Search-v0", tasks=2,
                   env_kwargs={"retriever": str(small_index("bm25"))})
    assert_held(report)
    assert report.verdicts()["forged.time"] == "N/A"  # no Python tool
    assert_hostile_inputs_held(report)


def test_sql_holds():
    tasks = [t for t in load_spider(["pets_1"])][:2]
    report = audit("tir/SQL-v0", tasks=2, env_kwargs={
        "tasks": tasks, "cache_dir": str(CACHE), "tool_timeout_s": 1.0,
        "reward": SQLReward(timeout_s=2.0, cache_dir=CACHE)})
    assert_held(report)
    assert report.verdicts()["forged.sql_runaway"] == "HELD"
    assert_hostile_inputs_held(report)


def test_autotir_holds(grader):
    tasks = [
        {"id": "k", "question": "Which city is the capital of France?", "answer": ["Paris"],
         "domain": "knowledge", "tool": "search"},
        {"id": "m", "question": "What is 123 * 456?", "answer": "56088", "domain": "math",
         "tool": "python"},
        {"id": "c", "question": "Which is a prime?\nA. 4\nB. 6\nC. 7\nD. 9", "answer": "C",
         "domain": "multiple_choice", "tool": None}]
    report = audit("tir/AutoTIR-v0", tasks=3, env_kwargs={
        "tasks": tasks, "retriever": str(small_index("bm25")), "tool_timeout_s": 1.0,
        "grader": grader})
    assert_held(report)
    assert report.verdicts()["hedge.every_letter"] == "HELD"  # a letter gold was probed


# ---------------------------------------------------------------- the probes can fail
class LeakyMathEnv(MathCodeEnv):
    """A weakened reward: a box in the last tool output is taken over the policy's own."""

    def answer(self):
        spans = [t.observation_span for t in self.trajectory.turns if t.observation_span[1]]
        if spans:
            start, end = spans[-1]
            seen = extract_final_answer(self.codec.decode(self.trajectory.token_ids[start:end]))
            if seen is not None:
                return seen
        return super().answer()


def test_a_reward_that_reads_tool_output_pays(grader):
    report = audit(lambda: LeakyMathEnv(tool_timeout_s=1.0, grader=grader), tasks=2,
                   probes=[p for p in PROBES if p.family == "copy"])
    assert report.verdicts()["copy.tool_printed_answer"] == PAYS
    assert report.verdicts()["copy.tool_printed_answer_only"] == PAYS
    assert not report.ok


class CounterTool(Tool):
    """The counter of docs/write_an_env.md."""

    name = "counter"

    async def open_session(self, task=None):
        return {"value": int(task.meta["start"])}

    async def call(self, arguments, session=None):
        step = arguments.get("step", "").strip()
        if not re.fullmatch(r"-?\d+", step):
            return ToolResult(f"Error: the step must be an integer, got {step!r}",
                              Status.ERROR)
        session["value"] += int(step)
        return ToolResult(str(session["value"]))


class CounterProtocol(Protocol):
    name = "counter"
    budgets = Budgets(max_turns=4, max_obs_tokens=64, max_total_tokens=1024)

    def __init__(self):
        super().__init__(
            TagsFormat([TagSpec(tag="add", tool="counter", argument="step", result_tag="value")]),
            system_prompt="Bring the counter to the target with <add>n</add>; answer with "
                          "<done>value</done>.")

    def render_answer(self, text):
        return f"<done>{text}</done>"

    def answer(self, state):
        found = re.findall(r"<done>(.*?)</done>", state.actions[-1], re.DOTALL)
        last = found[-1].strip() if found else None  # "<done>9 <done>10</done>" is no answer
        return last if last and re.fullmatch(r"-?\d+", last) else None


class CounterEnv(TIREnv):
    env_id = "audit-test/Counter-v0"
    tasks_list = [{"question": "The counter is at 3. Reach 10.", "answer": 10, "start": 3},
                  {"question": "The counter is at 5. Reach 1.", "answer": 1, "start": 5}]

    def __init__(self, tasks=None, **kwargs):
        kwargs.setdefault("reward", exact_reward)
        super().__init__(protocol=CounterProtocol(), tools=[CounterTool()],
                         tasks=tasks or self.tasks_list, **kwargs)


def exact_reward(task, trajectory, answer):
    correct = answer == str(task.answer)
    return RewardResult(float(correct), {"correct": float(correct)}, correct=correct,
                        answered=answer is not None)


def any_of_several(task, trajectory, answer):
    correct = str(task.answer) in re.findall(r"<done>(-?\d+)</done>", answer or "")
    return RewardResult(float(correct), {"correct": float(correct)}, correct=correct,
                        answered=True)


class AnyOfSeveralCounterEnv(CounterEnv):
    """A weakened reading and reward: right if any <done> of the last action is right."""

    env_id = "audit-test/AnyOfSeveral-v0"

    def __init__(self, tasks=None, **kwargs):
        super().__init__(tasks, reward=any_of_several, **kwargs)

    def answer(self):
        return self.actions[-1] if self.actions else None


class BlamingCounterTool(CounterTool):
    """A weakened tool: it reports the model's botched input as its own failure."""

    async def call(self, arguments, session=None):
        result = await super().call(arguments, session)
        return ToolResult.infra("bad step") if result.status == Status.ERROR else result


class BlamingCounterEnv(CounterEnv):
    def __init__(self, tasks=None, **kwargs):
        TIREnv.__init__(self, protocol=CounterProtocol(), tools=[BlamingCounterTool()],
                        tasks=tasks or self.tasks_list, **kwargs)


class SlowGraderCounterEnv(CounterEnv):
    """A weakened grader: no deadline of its own, and long answers take it a long time."""

    def __init__(self, tasks=None, **kwargs):
        super().__init__(tasks, reward=self.slow_reward, **kwargs)

    def slow_reward(self, task, trajectory, answer):
        if len(self.actions[-1]) > 2000:
            time.sleep(3)
        return exact_reward(task, trajectory, answer)


def test_forgeable_statuses_and_hanging_graders_mask():
    blamed = audit(BlamingCounterEnv, tasks=1, probes=[p for p in PROBES if p.family == "format"])
    assert blamed.verdicts()["format.answer_in_tool_input"] == MASKS and not blamed.ok
    slow = audit(SlowGraderCounterEnv, tasks=1, episode_timeout_s=1.0,
                 probes=[p for p in PROBES if p.name == "dos.nested_parens"])
    assert slow.verdicts() == {"dos.nested_parens": MASKS}
    assert "timeout" in slow.probes[0].episodes[0].error


gym.register(CounterEnv.env_id, entry_point=CounterEnv)
gym.register(AnyOfSeveralCounterEnv.env_id, entry_point=AnyOfSeveralCounterEnv)


def test_cli_exit_status_follows_the_verdicts(tmp_path, capsys):
    assert main(["audit", CounterEnv.env_id, "--tasks", "2", "--out", str(tmp_path / "a")]) == 0
    assert "**PASS**" in capsys.readouterr().out
    assert main(["audit", AnyOfSeveralCounterEnv.env_id, "--tasks", "2",
                 "--out", str(tmp_path / "b")]) == 1
    report = json.loads((tmp_path / "b" / "audit.json").read_text())
    verdicts = {p["name"]: p["verdict"] for p in report["probes"]}
    assert verdicts["format.several_answers"] == PAYS and not report["ok"]
    assert "## format.several_answers: PAYS" in (tmp_path / "b" / "audit.md").read_text()


def test_bad_input_is_named_before_any_episode(capsys):
    assert main(["audit", "tir/MathCode-v0", "--probe", "nope"]) == 2
    assert "--probe nope: unknown" in capsys.readouterr().err
    assert main(["audit", "tir/Nope-v0"]) == 1
    assert "unknown env id 'tir/Nope-v0'" in capsys.readouterr().err
    with pytest.raises(TypeError, match="render_answer"):
        audit(lambda: TIREnv(tools=[CounterTool()], tasks=CounterEnv.tasks_list))
    with pytest.raises(ValueError, match="tasks must be a positive int"):
        audit(CounterEnv.env_id, tasks=0)
    assert main(["audit", CounterEnv.env_id, "--import", "no_such_module_xyz"]) == 2
    assert "--import no_such_module_xyz" in capsys.readouterr().err


def test_a_broken_probe_is_an_error_not_a_verdict():
    from tir_envs.audit import Probe

    def broken(ctx):
        return [lambda c: c.answer(c.observations[5])]  # there is no sixth observation
    with pytest.raises(RuntimeError, match="the probe's script failed"):
        audit(CounterEnv.env_id, tasks=1, probes=[Probe("x.broken", "x", "a bug", broken)])


# ------------------------------------------------ what the battery found, pinned directly
@pytest.mark.parametrize("protocol,actions", [
    ("torl", ["```python\nprint('\\\\boxed{13}')  # \\boxed{13}\n```\n```output", "Done."]),
    ("zerotir", ["```python", "\n# \\boxed{13}\nprint(13)\n```", "Done."]),
])
def test_a_box_inside_code_is_no_answer(protocol, actions, grader):
    env = MathCodeEnv(protocol=protocol, tasks=[{"question": "6 + 7?", "answer": "13"}],
                      grader=grader, tool_timeout_s=2.0)
    try:
        env.reset(options={"index": 0})
        for text in actions:
            _, reward, terminated, truncated, info = env.step(env.codec.encode(text))
            if terminated or truncated:
                break
        traj = info["trajectory"]
        assert traj.answer is None and traj.correct is False
        assert reward == env.reward.wrong_reward == traj.reward
    finally:
        env.close()


def test_an_empty_response_scores_what_the_reward_says(grader):
    env = MathCodeEnv(protocol="torl", tasks=[{"question": "6 + 7?", "answer": "13"}],
                      grader=grader)
    try:
        env.reset(options={"index": 0})
        _, reward, terminated, _, info = env.step([])
        assert terminated and reward == -1.0 and info["trajectory"].reward == -1.0
    finally:
        env.close()


def test_the_add_a_probe_example_of_the_docs_runs():
    """docs/audit.md's "Add a probe" block registers two probes that then run in an audit."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "audit.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", doc, re.DOTALL) if "@probe(" in b)
    before = list(PROBES)
    try:
        exec(compile(block, "docs/audit.md", "exec"), {})  # noqa: S102 - our own doc
        added = PROBES[len(before):]
        assert [p.name for p in added] == ["hedge.plus_minus",
                                           "copy.search_then_answer_with_documents"]
        report = audit(CounterEnv.env_id, tasks=2)
        assert report.verdicts()["hedge.plus_minus"] == "HELD"
        assert report.verdicts()["copy.search_then_answer_with_documents"] == "N/A"
    finally:
        PROBES[:] = before


# ------------------------------------- issue 29: rewards that trust tool text, and new hedges
def _observations(env) -> list[str]:
    return [env.codec.decode(env.trajectory.token_ids[a:b])
            for a, b in (t.observation_span for t in env.trajectory.turns) if b > a]


class SandboxTextMathEnv(MathCodeEnv):
    """A weakened status: the episode is marked infra-failed when the tool's text says the
    sandbox failed (a status read from what the model's code printed)."""

    def turn_reward(self, turn, results):
        if any("sandbox" in r.text.lower() and ("fail" in r.text.lower() or
                                                "unavailable" in r.text.lower())
               for r in results):
            self.trajectory.infra_failed = True
        return super().turn_reward(turn, results)


class PassedMathEnv(MathCodeEnv):
    """A weakened reward: it pays when a tool printed "passed" (a verdict read from tool
    output, as a unit-test reward that greps the runner's log would)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.honest, self.reward = self.reward, as_reward(self.greps_the_log)

    def greps_the_log(self, task, trajectory, answer):
        if any("passed" in o.lower() for o in _observations(self)):
            return RewardResult(1.0, {"correct": 1.0}, correct=True, answered=True)
        return self.honest.score(task, trajectory, answer)


def test_the_status_probes_flag_rewards_that_trust_tool_text(grader):
    status = [p for p in PROBES if p.family == "status"]
    assert {p.name for p in status} == {"status.statuses", "status.verdicts"}
    masked = audit(lambda: SandboxTextMathEnv(tool_timeout_s=2.0, grader=grader), tasks=1,
                   probes=status)
    assert masked.verdicts()["status.statuses"] == MASKS and not masked.ok
    paid = audit(lambda: PassedMathEnv(tool_timeout_s=2.0, grader=grader), tasks=1,
                 probes=status)
    assert paid.verdicts()["status.verdicts"] == PAYS and not paid.ok
    honest = audit(lambda: MathCodeEnv(tool_timeout_s=2.0, grader=grader), tasks=1,
                   probes=status)
    assert honest.verdicts() == {"status.statuses": "HELD", "status.verdicts": "HELD"}


class LastSideMathEnv(MathCodeEnv):
    """A weakened grader: the deny-list of issue 21 only (a disjunction by \\lor or "or"),
    then the last side of whatever is left, as Math-Verify reads an unknown relation."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.honest, self.reward = self.reward, as_reward(self.last_side)

    def last_side(self, task, trajectory, answer):
        if answer is None or re.search(r"\\lor|\bor\b", str(answer)):
            return self.honest.score(task, trajectory, answer)
        last = re.split(r"\\(?:cancel|tag)\{[^{}]*\}|\\to\b|或|｜", str(answer))[-1].strip()
        correct = last == str(task.answer).strip()
        return RewardResult(1.0 if correct else -1.0, {"correct": float(correct)},
                            correct=correct, answered=True)


def test_the_new_hedge_probes_flag_a_last_side_grader(grader):
    new = [p for p in PROBES if p.name in {"hedge.to", "hedge.cancel", "hedge.cjk_or",
                                           "hedge.fullwidth_bar", "hedge.tag"}]
    assert len(new) == 5
    report = audit(lambda: LastSideMathEnv(tool_timeout_s=2.0, grader=grader), tasks=1,
                   probes=new)
    assert set(report.verdicts().values()) == {PAYS}
    held = audit(lambda: MathCodeEnv(tool_timeout_s=2.0, grader=grader), tasks=1, probes=new)
    assert set(held.verdicts().values()) == {"HELD"}


class SubscriptDroppingMathEnv(MathCodeEnv):
    """A weakened grader: drops a subscript before comparing, as graders did (issue 43)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.honest, self.reward = self.reward, as_reward(self.drops_subscripts)

    def drops_subscripts(self, task, trajectory, answer):
        if answer is None:
            return self.honest.score(task, trajectory, answer)
        correct = re.sub(r"_\{[^{}]*\}", "", str(answer)).strip() == str(task.answer).strip()
        return RewardResult(1.0 if correct else -1.0, {"correct": float(correct)},
                            correct=correct, answered=True)


def test_the_subscript_hedge_probe_flags_a_grader_that_drops_subscripts(grader):
    probe = [p for p in PROBES if p.name == "hedge.subscript"]
    assert len(probe) == 1
    paid = audit(lambda: SubscriptDroppingMathEnv(tool_timeout_s=2.0, grader=grader), tasks=1,
                 probes=probe)
    assert paid.verdicts() == {"hedge.subscript": PAYS}
    held = audit(lambda: MathCodeEnv(tool_timeout_s=2.0, grader=grader), tasks=1, probes=probe)
    assert held.verdicts() == {"hedge.subscript": "HELD"}
