"""The OpenRLHF adapter under OpenRLHF's real ``MultiTurnAgentExecutor``, one exact episode per
env, with a scripted engine that answers like vLLM (token ids in and out, stop strings kept in
the output).  Each episode is then replayed on a fresh env with the same action ids: OpenRLHF's
``observation_tokens`` must be the env's ledger, its ``action_ranges`` the ledger's policy
spans, its reward the trajectory's reward."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
from openrlhf.utils.agent import MultiTurnAgentExecutor

import tir_envs
from tests.search_helpers import small_index
from tests.sql_helpers import CACHE
from tir_envs.data.spider import load_spider
from tir_envs.task import Task
from tir_envs.tools.base import Tool
from tir_envs.trainers.common.env_config import ConfigError, EnvConfig
from tir_envs.trainers.common.labels import LabelError, index_tasks, task_from_label, task_label
from tir_envs.trainers.openrlhf.dataset import main as dataset_main
from tir_envs.trainers.openrlhf import executor as executor_module
from tir_envs.trainers.openrlhf.executor import TIRAgentExecutor, TIRAgentInstance

AGENT_FILE = Path(__file__).resolve().parents[1] / "trainers" / "openrlhf" / "agent.py"
TASK = {"id": "t/42", "question": "What is $6 \\times 7$?", "answer": "42"}
TAIL = "\nHALLUCINATED tool output the model made up\n"  # past a stop: must never be kept


# ------------------------------------------------------------------------------ harness
def load_agent_executor():
    """``AgentExecutor()`` from the agent file, loaded the way OpenRLHF's vllm_engine does."""
    spec = importlib.util.spec_from_file_location("agent_module", AGENT_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert issubclass(module.AgentExecutor, MultiTurnAgentExecutor)
    return module.AgentExecutor()


@dataclass
class Sampling:
    """The fields of vLLM's ``SamplingParams`` that OpenRLHF and the adapter touch."""

    temperature: float = 1.0
    max_tokens: int | None = None
    stop: list | None = None
    include_stop_str_in_output: bool = False
    logprobs: int | None = None
    skip_special_tokens: bool = False


class ScriptedEngine:
    """Answers each ``generate`` with the next scripted turn's ids, ending as vLLM would: at
    the first token whose output text contains one of the request's stop strings (text kept up
    to the stop's end), at EOS, or at ``max_tokens``."""

    def __init__(self, tokenizer, turns, logprob: float = -0.5):
        self.tok, self.turns, self.logprob = tokenizer, list(turns), logprob
        self.calls: list[dict] = []
        self.actions: list[list[int]] = []
        self.logprobs: list[list[float]] = []  # as the policy reported them, per action

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        await asyncio.sleep(0)  # let other episodes run, as a real engine would
        stops = list(sampling_params.stop or [])
        self.calls.append({"prompt": list(prompt_token_ids), "stop": stops,
                           "include": sampling_params.include_stop_str_in_output,
                           "max_tokens": sampling_params.max_tokens})
        script = self.tok.encode(self.turns.pop(0), add_special_tokens=False)
        ids, text, finish, reason = [], "", "stop", None
        for t in script:
            if len(ids) == sampling_params.max_tokens:
                finish = "length"
                break
            ids.append(t)
            text = self.tok.decode(ids, skip_special_tokens=False)
            hits = [(text.find(s) + len(s), s) for s in stops if s in text]
            if hits:
                end, reason = min(hits)
                text = text[:end]
                break
            if t == self.tok.eos_token_id:
                break
        self.actions.append(ids)
        self.logprobs.append([self.logprob] * len(ids))
        logprobs = None
        if sampling_params.logprobs is not None:
            logprobs = [{t: SimpleNamespace(logprob=self.logprob)} for t in ids]
        out = SimpleNamespace(token_ids=list(ids), text=text, finish_reason=finish,
                              stop_reason=reason, logprobs=logprobs)
        return SimpleNamespace(outputs=[out])


def execute(executor, label, engine, tok, max_length=16384, max_new_tokens=1024, logprobs=None,
            prompt=None):
    """One OpenRLHF sample.  ``max_new_tokens`` is OpenRLHF's ``--rollout.max_new_tokens``: the
    multi-turn executor only uses it to decide whether to cut the prompt."""
    sampling = Sampling(max_tokens=max_new_tokens, logprobs=logprobs)
    return executor.execute(prompt=prompt, label=label, sampling_params=sampling,
                            max_length=max_length, hf_tokenizer=tok, llm_engine=engine)


def run(executor, label, engine, tok, **kw):
    return asyncio.run(execute(executor, label, engine, tok, **kw))


def replay(env, task, engine):
    """The same episode on a fresh env, stepped with the ids (and logprobs) the engine produced.
    ``engine``: anything recording ``actions`` and ``logprobs`` per generation."""
    core = env.unwrapped
    core.reset(options={"task": task})
    for ids, logprobs in zip(engine.actions, engine.logprobs, strict=True):
        core.step({"tokens": ids, "logprobs": logprobs})
    traj = core.trajectory
    env.close()
    return traj


def assert_same_episode(result, traj, engine, fixes=0):
    """OpenRLHF's record of the episode is the env's ledger (see the module docstring).
    ``fixes``: observations whose fresh encoding differs from the env's ids."""
    ledger = traj.prompt_ids + traj.token_ids
    p = len(traj.prompt_ids)
    assert result["observation_tokens"] == ledger
    assert result["action_ranges"] == [(p + a, p + b) for a, b in
                                       (t.action_span for t in traj.turns)]
    mask = [0] * len(ledger)
    for a, b in result["action_ranges"]:
        mask[a:b] = [1] * (b - a)
    assert mask == [0] * p + traj.loss_mask
    assert result["reward"] == traj.reward
    assert result["scores"] == traj.reward
    assert result["extra_logs"]["tir/ledger_mismatch"] == 0.0
    assert result["extra_logs"]["tir/unfinished"] == 0.0
    assert result["extra_logs"]["tir/retokenize_fixes"] == fixes
    # each generation saw exactly the ledger up to its action, with stops kept in the output
    for call, (a, _) in zip(engine.calls, result["action_ranges"], strict=True):
        assert call["prompt"] == ledger[:a]
        assert call["include"] is True
    assert not any(TAIL.strip() in engine.tok.decode(a) for a in engine.actions)


def decoded(tok, ids):
    return tok.decode(ids, skip_special_tokens=False)


# ------------------------------------------------------------------------------ one per env
def test_torl_via_the_agent_file_and_env_variables(qwen_tok, monkeypatch):
    monkeypatch.setenv("TIR_ENV_ID", "tir/MathCode-v0")
    monkeypatch.setenv("TIR_ENV_KWARGS", json.dumps({"protocol": "torl", "tasks": [TASK]}))
    monkeypatch.delenv("TIR_ENV_CONFIG", raising=False)
    executor = load_agent_executor()
    engine = ScriptedEngine(qwen_tok, [
        "Let me compute.\n```python\nx = 6 * 7\nprint(x)\n```\n```output" + TAIL,
        "The product is $\\boxed{42}$." + qwen_tok.eos_token])
    result = run(executor, "t/42", engine, qwen_tok, logprobs=1)
    # ToRL stops at ```output, then (C = 1 call spent) at nothing: the env's stops, live
    assert [c["stop"] for c in engine.calls] == [["```output"], []]
    assert decoded(qwen_tok, engine.actions[0]).endswith("```output")
    traj = replay(tir_envs.make("tir/MathCode-v0", protocol="torl", tasks=[TASK],
                                tokenizer=qwen_tok), Task.coerce(TASK), engine)
    assert traj.reward == 1.0 and traj.correct is True
    assert_same_episode(result, traj, engine)
    assert result["rollout_log_probs"] == [0.0] * len(traj.prompt_ids) + traj.logprobs
    assert set(traj.logprobs) == {0.0, -0.5}
    logs = result["extra_logs"]
    assert logs["tir/correct"] == 1.0 and logs["tir/tool_calls"] == 1.0
    assert logs["tir/tool_calls/python"] == 1.0 and logs["tir/status/ok"] == 1.0
    assert logs["tir/infra_failed"] == 0.0 and logs["tir/ts_defined"] == 0.0


def test_zerotir_stops_change_mid_episode(qwen_tok):
    executor = TIRAgentExecutor(lambda tok: tir_envs.make(
        "tir/MathCode-v0", protocol="zerotir", tasks=[TASK], tokenizer=tok))
    engine = ScriptedEngine(qwen_tok, [
        " Compute it.\n```python\nx = 6 * 7\nprint(y)\n```" + TAIL,
        "\nx = 6 * 7\nprint(y)\n```" + TAIL,
        " Typo; x is still defined.\n```python\nprint(x)",
        "\nprint(x)\n```" + TAIL,
        " So 42.</think> <answer>\\boxed{42}</answer>" + qwen_tok.eos_token])
    result = run(executor, "t/42", engine, qwen_tok)
    assert [c["stop"] for c in engine.calls] == [["```python"], ["```"], ["```python"], ["```"],
                                                 ["```python"]]
    traj = replay(tir_envs.make("tir/MathCode-v0", protocol="zerotir", tasks=[TASK],
                                tokenizer=qwen_tok), Task.coerce(TASK), engine)
    assert [t.status for t in traj.turns] == ["no_call", "tool_error", "no_call", "ok", "no_call"]
    assert traj.reward == 1.0
    assert_same_episode(result, traj, engine)
    assert result["extra_logs"]["tir/status/error"] == 1.0
    assert result["extra_logs"]["tir/tool_calls/python"] == 2.0


def test_rite_chat_glue_observations(qwen_tok):
    executor = TIRAgentExecutor(lambda tok: tir_envs.make(
        "tir/MathCode-v0", protocol="rite", tasks=[TASK], tokenizer=tok))
    call = '<tool_call>\n{"name": "python", "arguments": {"code": "x = 6 * 7\\nprint(x)"}}\n' \
           '</tool_call>'
    answer = '<tool_call>\n{"name": "answer", "arguments": {"answer": "\\\\boxed{42}"}}\n' \
             '</tool_call>'
    engine = ScriptedEngine(qwen_tok, [f"<think>Multiply with Python.</think>\n{call}{TAIL}",
                                       f"<think>It is 42.</think>\n{answer}{TAIL}"])
    result = run(executor, "t/42", engine, qwen_tok)
    assert [c["stop"] for c in engine.calls] == [["</tool_call>"], ["</tool_call>"]]
    traj = replay(tir_envs.make("tir/MathCode-v0", protocol="rite", tasks=[TASK],
                                tokenizer=qwen_tok), Task.coerce(TASK), engine)
    span = traj.turns[0].observation_span
    assert decoded(qwen_tok, traj.token_ids[span[0]:span[1]]).startswith(
        "<|im_end|>\n<|im_start|>tool\n42")
    assert traj.reward == 2.0  # correct 1 + format 1
    assert_same_episode(result, traj, engine)


def test_search_with_a_whole_task_in_the_label(qwen_tok, monkeypatch):
    index = str(small_index("bm25"))
    task = {"id": "q/paris", "question": "What is the capital of France?", "answer": ["Paris"]}
    monkeypatch.setenv("TIR_ENV_ID", "tir/Search-v0")
    monkeypatch.setenv("TIR_ENV_KWARGS", json.dumps({"retriever": index, "tasks": []}))
    executor = load_agent_executor()
    engine = ScriptedEngine(qwen_tok, [
        "<think>Search it.</think>\n<search> capital of France </search>" + TAIL,
        "<think>Paris.</think>\n<answer> Paris </answer>" + TAIL])
    result = run(executor, task_label(Task.coerce(task), inline=True), engine, qwen_tok)
    assert [c["stop"] for c in engine.calls] == [["</search>", "</answer>"]] * 2
    traj = replay(tir_envs.make("tir/Search-v0", retriever=index, tokenizer=qwen_tok),
                  Task.coerce(task), engine)
    span = traj.turns[0].observation_span
    assert "Paris is the capital" in decoded(qwen_tok, traj.token_ids[span[0]:span[1]])
    assert traj.reward == 1.0
    assert_same_episode(result, traj, engine)
    assert result["extra_logs"]["tir/tool_calls/search"] == 1.0


def test_sql_on_spider(qwen_tok):
    pets = load_spider(["pets_1"])
    executor = TIRAgentExecutor(lambda tok: tir_envs.make(
        "tir/SQL-v0", tasks=pets, tokenizer=tok, cache_dir=CACHE))
    engine = ScriptedEngine(qwen_tok, [
        "<think>Which pets?</think>\n<sql>SELECT PetID, weight FROM Pets ORDER BY PetID</sql>"
        + TAIL,
        "<think>I should count them.</think> Let me answer in words: two pets.",
        "<think>Two.</think>\n<solution>SELECT count(*) FROM Pets WHERE weight > 10</solution>"
        + TAIL])
    result = run(executor, "pets_1/0", engine, qwen_tok)
    assert [c["stop"] for c in engine.calls] == [["</sql>", "</solution>"]] * 3
    traj = replay(tir_envs.make("tir/SQL-v0", tasks=pets, tokenizer=qwen_tok, cache_dir=CACHE),
                  pets[0], engine)
    assert [t.status for t in traj.turns] == ["ok", "tool_error", "no_call"]
    assert traj.reward == 1.0
    assert_same_episode(result, traj, engine)
    assert result["extra_logs"]["tir/tool_calls/sql"] == 1.0


def test_autotir_tool_choice_and_tool_selection(qwen_tok):
    index = str(small_index("bm25"))
    tasks = [{"id": "k1", "question": "Which city is the capital of France?", "answer": ["Paris"],
              "meta": {"domain": "knowledge", "tool": "search"}},
             {"id": "m1", "question": "What is 123456789 * 987654321?",
              "answer": "121932631112635269", "meta": {"domain": "math", "tool": "python"}}]

    def make(tok):
        return tir_envs.make("tir/AutoTIR-v0", tasks=tasks, retriever=index, tokenizer=tok)

    executor = TIRAgentExecutor(make)
    search = "<think>I should look it up.</think>\n<search>capital of France</search>"
    code = "<think>Too big.</think>\n<code>print(123456789 * 987654321)</code>"
    scripts = {"k1": [search + TAIL, "<think>Found it.</think> <answer> The final answer is "
                      "\\boxed{Paris} </answer>" + TAIL],
               "m1": [search + TAIL, code + TAIL, "<answer>\\boxed{121932631112635269}</answer>"]}
    for task_id, turns in scripts.items():
        engine = ScriptedEngine(qwen_tok, turns)
        result = run(executor, task_id, engine, qwen_tok)
        assert {tuple(c["stop"]) for c in engine.calls} == {("</search>", "</code>", "</answer>")}
        task = Task.coerce(next(t for t in tasks if t["id"] == task_id))
        traj = replay(make(qwen_tok), task, engine)
        assert_same_episode(result, traj, engine)
        assert traj.correct is True
        logs = result["extra_logs"]
        assert logs["tir/correct"] == 1.0 and logs["tir/ts_defined"] == 1.0
        ts = traj.metadata["tool_selection"]  # the env's own record
        assert logs["tir/ts"] == ts["right"] / ts["invocations"]
        assert logs["tir/tool_calls/search"] == 1.0
        assert logs["tir/tool_calls/python"] == float(task_id == "m1")
    assert logs["tir/ts"] == 0.5  # search then code on a math task


# ------------------------------------------------------------------------------ failures, fixes
class DeadSandbox(Tool):
    """A python tool whose sandbox is gone: every call is an infrastructure failure."""

    name = "python"

    async def call(self, arguments, session=None):
        raise ConnectionError("sandbox worker died")


def test_infra_failure_is_marked_for_dropping(qwen_tok):
    def make(tok):
        return tir_envs.make("tir/MathCode-v0", protocol="torl", tasks=[TASK], tokenizer=tok,
                             tool=DeadSandbox())
    engine = ScriptedEngine(qwen_tok, ["```python\nprint(6 * 7)\n```\n```output",
                                       "So $\\boxed{42}$." + qwen_tok.eos_token])
    result = run(TIRAgentExecutor(make), "t/42", engine, qwen_tok)
    traj = replay(make(qwen_tok), Task.coerce(TASK), engine)
    assert traj.infra_failed and traj.turns[0].status == "infra_error"
    assert result["observation_tokens"] == traj.prompt_ids + traj.token_ids
    assert result["reward"] == traj.reward  # the env's reward, not zeroed
    assert math.isnan(result["scores"])     # dynamic filtering drops the group
    logs = result["extra_logs"]
    assert logs["tir/infra_failed"] == 1.0 and logs["tir/status/infra_error"] == 1.0
    assert logs["tir/tool_calls/python"] == 1.0


def test_an_env_that_raises_is_kept_as_a_failed_episode(qwen_tok):
    """An exception out of the env's step does not fail OpenRLHF's batch: the episode ends
    there, flagged like the rollout engine flags it, with a NaN score."""
    env = tir_envs.make("tir/MathCode-v0", protocol="torl", tasks=[TASK], tokenizer=qwen_tok)

    async def broken(action):
        raise OSError("disk full")

    env.unwrapped.astep = broken
    engine = ScriptedEngine(qwen_tok, ["```python\nprint(1)\n```\n```output", "unused"])
    result = run(TIRAgentExecutor(lambda tok: env), "t/42", engine, qwen_tok)
    traj = env.unwrapped.trajectory
    assert len(engine.calls) == 1 and result["reward"] == 0.0 and math.isnan(result["scores"])
    assert traj.infra_failed and traj.metadata["failure"]["message"] == "OSError: disk full"
    assert result["extra_logs"]["tir/infra_failed"] == 1.0
    assert result["extra_logs"]["tir/unfinished"] == 0.0


def test_a_prompt_openrlhf_cuts_is_flagged(qwen_tok):
    """OpenRLHF cuts a prompt longer than max_len - max_new_tokens from the left: what the
    policy saw is no longer the env's ledger, and the episode says so."""
    env = tir_envs.make("tir/MathCode-v0", protocol="torl", tasks=[TASK], tokenizer=qwen_tok)
    prompt = env.unwrapped.reset(options={"index": 0})[0]["tokens"].tolist()
    engine = ScriptedEngine(qwen_tok, ["$\\boxed{42}$" + qwen_tok.eos_token])
    result = run(TIRAgentExecutor(lambda tok: env), "t/42", engine, qwen_tok,
                 max_length=len(prompt) + 20, max_new_tokens=40)
    assert engine.calls[0]["prompt"] == prompt[-(len(prompt) - 20):]
    assert result["extra_logs"]["tir/ledger_mismatch"] == 1.0
    assert result["reward"] == env.unwrapped.trajectory.reward == 1.0


def test_observation_cut_mid_character_keeps_the_env_ids(qwen_tok):
    """A fresh encoding of the decoded observation would differ (a character split by the
    token cap decodes to U+FFFD); the adapter hands OpenRLHF the env's ids instead."""
    def make(tok):
        return tir_envs.make("tir/MathCode-v0", protocol="torl", tasks=[TASK], tokenizer=tok,
                             max_obs_tokens=41)
    engine = ScriptedEngine(qwen_tok, ["```python\nprint('𓀀' * 80)\n```\n```output",
                                       "$\\boxed{42}$" + qwen_tok.eos_token])
    result = run(TIRAgentExecutor(make), "t/42", engine, qwen_tok)
    traj = replay(make(qwen_tok), Task.coerce(TASK), engine)
    a, b = traj.turns[0].observation_span
    obs = traj.token_ids[a:b]
    assert qwen_tok.encode(decoded(qwen_tok, obs), add_special_tokens=False) != obs
    assert_same_episode(result, traj, engine, fixes=1)


def test_concurrent_episodes_share_envs_and_report_the_same_keys(qwen_tok):
    tasks = [TASK, {"id": "t/9", "question": "What is $3^2$?", "answer": "9"}]
    made = []

    def make(tok):
        made.append(tir_envs.make("tir/MathCode-v0", protocol="torl", tasks=tasks, tokenizer=tok))
        return made[-1]

    executor = TIRAgentExecutor(make)
    eos, call = qwen_tok.eos_token, "```python\nprint(3 ** 2)\n```\n```output"
    scripts = {"right": ("t/42", ["```python\nprint(6 * 7)\n```\n```output", "$\\boxed{42}$" + eos]),
               "wrong": ("t/9", ["It is $\\boxed{8}$." + eos]),
               "cut": ("t/9", [call, "$\\boxed{9}$" + eos])}
    engines = {k: ScriptedEngine(qwen_tok, turns) for k, (_, turns) in scripts.items()}
    probe = tir_envs.make("tir/MathCode-v0", protocol="torl", tasks=tasks, tokenizer=qwen_tok)
    prompt = probe.unwrapped.reset(options={"index": 1})[0]["tokens"].tolist()
    probe.close()
    # room for the call but not for what comes after its output: OpenRLHF stops first
    short = len(prompt) + len(qwen_tok.encode(call, add_special_tokens=False)) + 1

    async def batch():
        return await asyncio.gather(*[
            execute(executor, label, engines[k], qwen_tok, max_length=short if k == "cut" else 8000,
                    max_new_tokens=1 if k == "cut" else 1024)
            for k, (label, _) in scripts.items()])

    results = dict(zip(scripts, asyncio.run(batch())))
    assert len(made) == 3 and len(executor.pool.free) == 3  # one env per concurrent episode
    for k in ("right", "wrong"):
        task = Task.coerce(next(t for t in tasks if t["id"] == scripts[k][0]))
        env = tir_envs.make("tir/MathCode-v0", protocol="torl", tasks=tasks, tokenizer=qwen_tok)
        assert_same_episode(results[k], replay(env, task, engines[k]), engines[k])
    assert results["right"]["reward"] == 1.0 and results["wrong"]["reward"] == -1.0
    cut = results["cut"]  # OpenRLHF's max_len ended it before the env did: flagged, NaN score
    assert len(engines["cut"].calls) == 1 and len(cut["observation_tokens"]) > short
    assert cut["extra_logs"]["tir/unfinished"] == 1.0 and math.isnan(cut["scores"])
    assert cut["extra_logs"]["tir/ledger_mismatch"] == 0.0  # what was played is the ledger
    keys = {k: sorted(r["extra_logs"]) for k, r in results.items()}
    assert keys["right"] == keys["wrong"] == keys["cut"]
    assert all(not env.unwrapped._sessions for env in made)  # the cut episode's sandbox closed
    # the pooled envs serve the next episodes
    again = ScriptedEngine(qwen_tok, ["$\\boxed{9}$" + eos])
    assert run(executor, "t/9", again, qwen_tok)["reward"] == 1.0 and len(made) == 3


# ------------------------------------------------------------------------------ config, labels
def test_configuration_errors_say_how_to_fix(tmp_path):
    with pytest.raises(ConfigError, match="TIR_ENV_ID"):
        EnvConfig.from_environ({})
    with pytest.raises(ConfigError, match="not both"):
        EnvConfig.from_environ({"TIR_ENV_CONFIG": "x.yaml", "TIR_ENV_ID": "tir/SQL-v0"})
    with pytest.raises(ConfigError, match="not valid JSON"):
        EnvConfig.from_environ({"TIR_ENV_ID": "tir/SQL-v0", "TIR_ENV_KWARGS": "{recipe: 1}"})
    with pytest.raises(ConfigError, match="JSON object"):
        EnvConfig.from_environ({"TIR_ENV_ID": "tir/SQL-v0", "TIR_ENV_KWARGS": "[1]"})
    with pytest.raises(ConfigError, match="registered ids: .*tir/MathCode-v0"):
        EnvConfig.from_environ({"TIR_ENV_ID": "tir/Math-v9"})
    path = tmp_path / "env.yaml"
    path.write_text("env_id: tir/MathCode-v0\nenv_kwargs:\n  protocol: zerotir\n")
    assert EnvConfig.from_environ({"TIR_ENV_CONFIG": str(path)}) == \
        EnvConfig("tir/MathCode-v0", {"protocol": "zerotir"})
    path.write_text("env_id: tir/MathCode-v0\nkwargs: {}\n")
    with pytest.raises(ConfigError, match="unknown key"):
        EnvConfig.from_yaml(path)
    with pytest.raises(ConfigError, match="no such file"):
        EnvConfig.from_yaml(tmp_path / "missing.yaml")


def test_labels_name_tasks_or_carry_them():
    tasks = [Task.coerce(TASK), Task("dup", "a?"), Task("dup", "b?")]
    index = index_tasks(tasks)
    assert task_from_label("t/42", index) is tasks[0]
    assert task_from_label('{"id": "t/42"}', index) is tasks[0]
    assert task_from_label(task_label(tasks[0], inline=True), index) == tasks[0]
    assert task_from_label({"question": "x?", "answer": "1"}, {}).question == "x?"
    with pytest.raises(LabelError, match="not the id of any of the env's 2 tasks.*--inline"):
        task_from_label("t/43", index)
    with pytest.raises(LabelError, match="occurs twice"):
        task_from_label("dup", index)
    with pytest.raises(LabelError, match="not"):
        task_from_label("{oops", index)


def test_agent_instance_outside_the_executor_is_refused():
    with pytest.raises(RuntimeError, match="TIRAgentExecutor"):
        TIRAgentInstance()


def test_dataset_helper_writes_prompts_the_adapter_accepts(tmp_path, qwen_tok, caplog,
                                                           monkeypatch):
    out = tmp_path / "math.jsonl"
    assert dataset_main(["--env", "tir/MathCode-v0", "--tasks", "math500", "--limit", "3",
                         "--env-kwargs", '{"protocol": "zerotir"}', "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    env = tir_envs.make("tir/MathCode-v0", protocol="zerotir", tasks="math500")
    core = env.unwrapped
    index = index_tasks(core.tasks)
    assert len(rows) == 3 and [r["label"] for r in rows] == [t.id for t in core.tasks[:3]]
    for row, task in zip(rows, core.tasks):
        obs, _ = core.reset(options={"task": task_from_label(row["label"], index)})
        assert row["prompt"] == core.codec.decode(obs["tokens"].tolist())
    inline = tmp_path / "inline.jsonl"
    dataset_main(["--env", "tir/MathCode-v0", "--tasks", "math500", "--limit", "1", "--inline",
                  "--out", str(inline)])
    label = json.loads(inline.read_text())["label"]
    assert task_from_label(label, {}) == core.tasks[0]
    env.close()
    # an executor fed the dataset's prompt stays quiet; another env setting's prompt is noticed
    executor = TIRAgentExecutor(lambda tok: tir_envs.make(
        "tir/MathCode-v0", protocol="zerotir", tasks="math500", tokenizer=tok))
    engine = ScriptedEngine(qwen_tok, ["\\boxed{1}" + qwen_tok.eos_token])
    monkeypatch.setattr(executor_module, "_WARNED", set())
    run(executor, rows[0]["label"], engine, qwen_tok, prompt=rows[0]["prompt"])
    assert "differs" not in caplog.text
    engine = ScriptedEngine(qwen_tok, ["\\boxed{1}" + qwen_tok.eos_token])
    run(executor, rows[0]["label"], engine, qwen_tok, prompt="<|im_start|>user\n" + rows[0]["prompt"])
    assert "the dataset's prompt differs" in caplog.text
    with pytest.raises(SystemExit):
        dataset_main(["--env", "tir/Nope-v0", "--out", str(out)])
