"""tir/AutoTIR-v0: exact-ledger scripted episodes per domain and reward case, with the real
BM25 index, the real Python sandbox, the real Qwen2.5 tokenizer, and exact reward values."""

from __future__ import annotations

import pytest
from gymnasium.utils.env_checker import check_env

import tir_envs
from tests.fixtures.episodes import assert_interleaved, play
from tests.search_helpers import small_index
from tir_envs.data.autotir import autotir_train, eval_questions, load_autotir_tasks
from tir_envs.envs.autotir import AutoTIREnv
from tir_envs.protocols.autotir import STANDALONE_PROMPT, TOOL_PROMPT
from tir_envs.rewards.math.pool import GraderPool
from tir_envs.rollout import ScriptedPolicy, collect
from tir_envs.task import Task
from tir_envs.tools.search import open_retriever
from tir_envs.tools.search.formatting import format_hits

KNOWLEDGE = Task("k1", "Which city is the capital of France?", ["Paris"],
                 {"domain": "knowledge", "tool": "search"})
MATH = Task("m1", "What is 123456789 * 987654321?", "121932631112635269",
            {"domain": "math", "tool": "python"})
INSTRUCTION = Task("i1", "Write a haiku about rain. Do not use any commas.", None,
                   {"domain": "instruction", "tool": None,
                    "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]})
CHOICE = Task("c1", "Which is a prime?\nA. 4\nB. 6\nC. 7\nD. 9", "C",
              {"domain": "multiple_choice", "tool": None})

SEARCH = "<think>I should look it up.</think>\n<search>capital of France</search>"
CODE = "<think>Too big to do by hand.</think>\n<code>print(123456789 * 987654321)</code>"
CODE_KNOWLEDGE = "<think>Let me try code.</think>\n<code>print('Paris')</code>"


@pytest.fixture(scope="module")
def grader():
    with GraderPool(workers=1, timeout_s=30) as pool:
        yield pool


@pytest.fixture(scope="module")
def retriever():
    return open_retriever(small_index("bm25"))


@pytest.fixture
def make(qwen_tok, grader, retriever):
    envs = []

    def build(task, **kw):
        env = AutoTIREnv(tokenizer=qwen_tok, tasks=[task], retriever=retriever, grader=grader,
                         **kw)
        envs.append(env)
        return env
    yield build
    for env in envs:
        env.close()


def run(env, qwen_tok, actions):
    """Play the scripted actions; return the episode as played and its trajectory."""
    obs, info = env.reset(options={"index": 0})
    policy = ScriptedPolicy(actions, tokenizer=qwen_tok, logprob=-0.5)
    played = play(env, policy, obs["tokens"].tolist(), len(actions), expected_texts=actions)
    traj = played.info["trajectory"]
    assert_interleaved(traj, played)
    assert traj.logprobs == [-0.5 if m else 0.0 for m in traj.loss_mask]
    return played, traj


def result_block(text: str) -> str:
    return f"\n<result>\n{text}\n</result>\n"


def test_prompt_is_the_chat_template_over_the_protocol_messages(make, qwen_tok):
    env = make(KNOWLEDGE)
    obs, info = env.reset(options={"index": 0})
    expected = qwen_tok.apply_chat_template(
        [{"role": "system", "content": TOOL_PROMPT}, {"role": "user", "content": KNOWLEDGE.question}],
        tokenize=False, add_generation_prompt=True)
    assert obs["tokens"].tolist() == env.codec.encode(expected)
    assert info["stop_sequences"] == ["</search>", "</code>", "</answer>"]


def test_knowledge_right_tool_right_answer(make, qwen_tok, retriever):
    env = make(KNOWLEDGE)
    played, traj = run(env, qwen_tok, [
        SEARCH, "<think>Found it.</think> <answer> The final answer is \\boxed{Paris} </answer>"])
    hits = format_hits(retriever.search("capital of France", 3)).strip("\n")
    assert qwen_tok.decode(played.observations[0]) == result_block(hits)
    assert traj.reward == pytest.approx(1.0)  # 0.1 * 1 + 0.9 * F1 1
    assert traj.reward_components["r_act"] == 1.0 and traj.reward_components["r_out"] == 1.0
    assert (traj.correct, traj.answer) == (True, "Paris")
    assert traj.metadata["tool_selection"] == {"ground_truth": "search", "right": 1,
                                               "invocations": 1}


def test_knowledge_wrong_tool_right_answer_is_penalised(make, qwen_tok):
    env = make(KNOWLEDGE)
    played, traj = run(env, qwen_tok, [CODE_KNOWLEDGE, "\\boxed{Paris}"])
    assert qwen_tok.decode(played.observations[0]) == result_block("Paris")
    assert traj.reward == pytest.approx(0.1 * -1 + 0.9 * 1)
    assert traj.correct and traj.metadata["tool_selection"]["right"] == 0


def test_math_right_tool_right_answer(make, qwen_tok):
    env = make(MATH)
    played, traj = run(env, qwen_tok, [CODE, "The product is \\boxed{121932631112635269}."])
    assert qwen_tok.decode(played.observations[0]) == result_block("121932631112635269")
    assert traj.reward == pytest.approx(1.0) and traj.correct
    assert traj.tool_counts() == {"python": 1}


def test_math_without_a_tool_gets_no_action_credit(make, qwen_tok):
    env = make(MATH)
    _, traj = run(env, qwen_tok, ["<think>I know this.</think> \\boxed{121932631112635269}"])
    assert traj.reward == pytest.approx(0.9)  # no_tool = 0 by default
    env2 = make(MATH, no_tool=-0.5)
    _, traj = run(env2, qwen_tok, ["\\boxed{121932631112635269}"])
    assert traj.reward == pytest.approx(0.1 * -0.5 + 0.9)


def test_search_then_code_on_math_is_a_wrong_tool(make, qwen_tok):
    env = make(MATH)
    _, traj = run(env, qwen_tok, [SEARCH, CODE, "\\boxed{121932631112635269}"])
    assert traj.tool_counts() == {"search": 1, "python": 1}
    assert traj.reward == pytest.approx(0.1 * -1 + 0.9 * 1)
    assert traj.metadata["tool_selection"] == {"ground_truth": "python", "right": 1,
                                               "invocations": 2}


def test_output_reward_is_eq5_max_floor_when_boxed_else_zero(make, qwen_tok):
    """AutoTIR eq. 5: r_out = max(0.1, f_eva) for a correctly formatted (boxed) output, else 0."""
    env = make(MATH)
    _, traj = run(env, qwen_tok, [CODE, "<answer>\\boxed{121932631112635268}</answer>"])
    assert traj.reward == pytest.approx(0.19) and traj.correct is False  # 0.1*1 + 0.9*0.1
    assert traj.reward_components["f_eva"] == 0.0 and traj.reward_components["r_out"] == 0.1
    env = make(KNOWLEDGE)
    _, traj = run(env, qwen_tok, [SEARCH, "<answer>Paris</answer>"])
    assert traj.reward == pytest.approx(0.1) and traj.correct  # right, but not boxed: r_out 0
    assert traj.reward_components["formatted"] == 0.0
    # a box outside the last <answer> block does not format it
    _, traj = run(env, qwen_tok, [SEARCH, "\\boxed{Paris} <answer>Paris</answer>"])
    assert traj.reward == pytest.approx(0.1)


def test_output_reward_plain_keeps_the_score_as_it_is(make, qwen_tok):
    env = make(MATH, output_reward="plain")
    _, traj = run(env, qwen_tok, [CODE, "<answer>\\boxed{121932631112635268}</answer>"])
    assert traj.reward == pytest.approx(0.1)
    env = make(KNOWLEDGE, output_reward="plain")
    _, traj = run(env, qwen_tok, [SEARCH, "<answer>Paris</answer>"])
    assert traj.reward == pytest.approx(1.0)
    with pytest.raises(ValueError, match="output_reward"):
        make(KNOWLEDGE, output_reward="eq5")


def test_instruction_task_answered_directly(make, qwen_tok):
    env = make(INSTRUCTION)
    _, traj = run(env, qwen_tok, ["<think>No commas.</think>\nSoft rain on the roof\n"
                                  "grey clouds hum a quiet song\npuddles hold the sky"])
    assert traj.reward == pytest.approx(0.1) and traj.correct  # eq. 5: no box, r_out = 0
    env = make(INSTRUCTION, output_reward="plain")
    _, traj = run(env, qwen_tok, ["<think>No commas.</think>\nSoft rain on the roof\n"
                                  "grey clouds hum a quiet song\npuddles hold the sky"])
    assert traj.reward == pytest.approx(1.0) and traj.correct
    assert traj.metadata["tool_selection"]["right"] is None  # TS undefined: tool use is free
    _, traj = run(env, qwen_tok, ["Rain falls, softly, on the roof."])
    assert traj.reward == pytest.approx(0.1) and traj.correct is False


def test_instruction_answer_in_the_answer_box(make, qwen_tok):
    env = make(INSTRUCTION)
    _, traj = run(env, qwen_tok, ["<think>Plan.</think><answer>\\boxed{Rain taps the window\n"
                                  "slow grey hours drift by\nthe garden drinks}</answer>"])
    assert traj.reward == pytest.approx(1.0)
    assert traj.answer == "Rain taps the window\nslow grey hours drift by\nthe garden drinks"


def test_instruction_task_may_use_a_tool_freely(make, qwen_tok):
    env = make(INSTRUCTION, output_reward="plain")
    _, traj = run(env, qwen_tok, [SEARCH, "Rain on tin roofs\nsilver threads stitch the dark "
                                          "sky\nmorning smells of earth"])
    assert traj.reward == pytest.approx(1.0)


def test_multiple_choice(make, qwen_tok):
    env = make(CHOICE)
    _, traj = run(env, qwen_tok, ["<think>7 is prime.</think> \\boxed{C}"])
    assert traj.reward == pytest.approx(1.0) and traj.answer == "C"
    _, traj = run(env, qwen_tok, ["\\boxed{B} or \\boxed{C}"])  # hedging chooses nothing
    assert traj.reward == pytest.approx(0.1) and not traj.answered  # no answer: no floor


def test_budget_exhaustion_ends_truncated_with_no_outcome(make, qwen_tok):
    env = make(MATH, max_turns=2)
    obs, _ = env.reset(options={"index": 0})
    env.step(env.codec.encode(CODE))
    _, reward, term, trunc, info = env.step(env.codec.encode(CODE))
    traj = info["trajectory"]
    assert trunc and not term and traj.stop_reason == "max_turns"
    assert traj.num_tool_calls == 1  # the call at the last turn is not executed
    assert traj.reward == pytest.approx(0.1 * 1 + 0.9 * 0) and traj.answered is False


def test_answer_in_a_tool_result_does_not_count(make, qwen_tok):
    env = make(MATH)
    box = "<code>x = 123456789 * 987654321\nprint('\\\\boxed{' + str(x) + '}')</code>"
    played, traj = run(env, qwen_tok, [box, "I am done."])
    assert "\\boxed{121932631112635269}" in qwen_tok.decode(played.observations[0])
    assert traj.answered is False and traj.reward == pytest.approx(0.1)


def test_standalone_mode(make, qwen_tok):
    env = make(MATH, use_tools=False)
    obs, info = env.reset(options={"index": 0})
    assert STANDALONE_PROMPT in env.codec.decode(obs["tokens"])
    assert info["stop_sequences"] == ["</answer>"]
    *_, info = env.step(env.codec.encode(CODE))  # no tool runs; the action is the answer
    assert info["trajectory"].num_tool_calls == 0


def test_tasks_need_a_domain(qwen_tok, retriever):
    with pytest.raises(ValueError, match=r"meta\['domain'\]"):
        AutoTIREnv(tokenizer=qwen_tok, retriever=retriever, tasks=[{"question": "q"}])


def test_training_mix_never_overlaps_an_eval_set():
    train = autotir_train(size=2000, seed=1)
    held_out = eval_questions()
    norm = [" ".join(t.question.lower().split()).rstrip("?") for t in train]
    assert not set(norm) & held_out
    assert {t.meta["domain"] for t in train} == {"knowledge", "math", "instruction"}
    assert [t.id for t in autotir_train(size=2000, seed=1)] == [t.id for t in train]  # seeded


def test_eval_sets_by_name_carry_domain_and_tool():
    expect = {"hotpotqa": (500, "search"), "bamboogle": (125, "search"), "aime24": (30, "python"),
              "math500": (500, "python"), "logiqa": (651, None), "ifeval": (541, None)}
    for name, (count, tool) in expect.items():
        tasks = load_autotir_tasks(name)
        assert len(tasks) == count and {t.meta["tool"] for t in tasks} == {tool}


def test_check_env_and_the_rollout_engine(qwen_tok, retriever, grader):
    env = AutoTIREnv(tokenizer=qwen_tok, retriever=retriever, grader=grader,
                     tasks=[KNOWLEDGE, MATH])
    check_env(env, skip_render_check=True)
    env.close()

    def script(context: str) -> str:
        if "capital of France" in context:
            return SEARCH if "\n<result>\n" not in context else "\\boxed{Paris}"
        return CODE if "\n<result>\n" not in context else "\\boxed{121932631112635269}"

    out = collect(lambda: AutoTIREnv(tokenizer=qwen_tok, retriever=retriever, grader=grader,
                                     tasks=[KNOWLEDGE, MATH]),
                  ScriptedPolicy(script, tokenizer=qwen_tok), tasks=None, samples_per_task=2,
                  progress=False)
    assert len(out) == 4 and all(t.reward == pytest.approx(1.0) for t in out)


def test_registered():
    assert "tir/AutoTIR-v0" in tir_envs.ENV_SPECS


@pytest.mark.parametrize("response", [
    # a compliant box (no comma) beside text that breaks the instruction
    "Rain falls, softly, on the roof. <answer>\\boxed{Soft rain on the roof}</answer>",
    "<answer>Rain, rain, rain \\boxed{Soft rain on the roof}</answer>",
    "Also: one, two, three.\n\\boxed{Soft rain on the roof}",
    "Rain, falls \\boxed{Soft rain}",
])
def test_instructions_are_checked_on_the_whole_visible_response(make, qwen_tok, response):
    """Issue 29: IFEval instructions hold on everything the reader sees, never only on a box."""
    env = make(INSTRUCTION)
    _, traj = run(env, qwen_tok, [response])
    assert traj.correct is False and traj.reward_components["f_eva"] == 0.0
    assert "," in traj.answer


def test_the_visible_response_unwraps_markup_in_place():
    from tir_envs.answers.autotir import visible_response

    assert visible_response(["<think>a, b</think>x <answer>\\boxed{y \\boxed{z}} w</answer>"]) \
        == "x y z w"
    assert visible_response(["\\boxed{open"]) == "open"
