"""TRL's ``environment_factory`` over a tir env: the class TRL instantiates (tools as methods
with schemas, ``answer``, ``get_reward``), and the drift of TRL's re-rendering against the env's
ledger, measured.  The class is plain Python: no TRL needed to test it."""

from __future__ import annotations

import inspect

import pytest

from tir_envs.trainers.trl.environment import ledger_drift, make_environment_factory

TASKS = [{"id": "fr", "question": "What is the capital of France?", "answer": "Paris"},
         {"id": "jp", "question": "What is the capital of Japan?", "answer": "Tokyo"}]


def capital(country: str) -> str:
    """The capital city of a country.

    Args:
        country: the country's English name.
    """
    return {"France": "Paris", "Japan": "Tokyo"}.get(country, "unknown")


@pytest.fixture(scope="module")
def factory():
    return make_environment_factory("tir/ToolUse-v0", tasks=TASKS, tools=[capital])


def test_public_methods_are_the_tools_with_schemas(factory):
    public = sorted(n for n, _ in inspect.getmembers(factory, inspect.isfunction)
                    if not n.startswith("_"))
    assert public == ["answer", "capital", "get_reward", "reset"]  # TRL: all else is a tool
    assert str(inspect.signature(factory.capital)) == "(self, *, country: str) -> str"
    from transformers.utils import get_json_schema
    schema = get_json_schema(factory.capital)
    assert schema["function"]["name"] == "capital"
    assert schema["function"]["parameters"]["properties"]["country"] == {
        "type": "string", "description": "the country's English name."}
    assert get_json_schema(factory.answer)["function"]["parameters"]["required"] == ["answer"]


def test_an_episode_as_trl_plays_it(factory):
    env = factory()
    try:
        env.reset(prompt=[{"role": "user", "content": "..."}], label="fr")
        assert env.capital(country="France") == "Paris"  # the result, without chat glue
        env.answer(answer="Paris")
        assert env.get_reward() == 1.0 and env.trajectory.correct
        env.reset(question="What is the capital of Japan?", answer="Tokyo")
        env.capital(country="Japan")
        assert env.get_reward() == 0.0  # stopped without answering: the env's reward says 0
        assert env.trajectory.answered is False
        assert env.capital(country="Japan").startswith("Error: the episode is over")
    finally:
        env._close()


def test_a_row_without_a_task_is_refused(factory):
    env = factory()
    with pytest.raises(ValueError, match="needs 'label'"):
        env.reset(prompt="hi")
    env._close()


def trl_sequence(tok, question, tools, turns):
    """The ids TRL's tool loop trains on for ``turns`` (``(generated text, tool message or
    None)``): its prompt (the template with ``tools=``), each generation as sampled, and each
    tool result as the template's suffix after an assistant turn with tool calls (the EOS-
    trimmed prefix cut off, as TRL documents it)."""
    prompt = tok.apply_chat_template([{"role": "user", "content": question}], tools=tools,
                                     add_generation_prompt=True, tokenize=True,
                                     return_dict=False)
    completion = []
    for generated, tool_message in turns:
        completion += tok.encode(generated, add_special_tokens=False)
        if tool_message is None:
            continue
        calls = [{"type": "function", "function": {"name": tool_message["name"],
                                                   "arguments": {}}}]
        dummy = [{"role": "user", "content": "dummy"},
                 {"role": "assistant", "content": "", "tool_calls": calls}]
        prefix = tok.apply_chat_template(dummy, tokenize=True, return_dict=False)
        full = tok.apply_chat_template(dummy + [tool_message], add_generation_prompt=True,
                                       tokenize=True, return_dict=False)
        eos = [i for i, t in enumerate(prefix) if t == tok.eos_token_id]
        prefix = prefix[:eos[-1] + 1] if eos else prefix
        completion += full[len(prefix):]
    return list(prompt), completion


def capital_episode_drift(env) -> dict:
    """Play the capital episode (one call, then the answer) in ``env`` (an
    ``environment_factory`` instance) and measure TRL's rendering of it against the ledger."""
    from tir_envs.envs.tool_use import tool_schema
    env.reset(label="fr")
    result = env.capital(country="France")
    env.answer(answer="Paris")
    tok = env._env.tokenizer
    tools = [tool_schema(t) for t in env._env.tools.values()]
    call = '<tool_call>\n{"name": "capital", "arguments": {"country": "France"}}\n</tool_call>'
    prompt, completion = trl_sequence(
        tok, TASKS[0]["question"], tools,
        [(call + "<|im_end|>", {"role": "tool", "name": "capital", "content": result}),
         ("<answer>Paris</answer><|im_end|>", None)])
    return ledger_drift(env.trajectory, prompt, completion)


def test_trl_rerendering_drifts_from_the_ledger(factory):
    """What TRL trains on under environment_factory is its own rendering (its prompt with the
    template's tools, the template's glue around results); measured against the env's ledger
    of the same episode, with the same generated text."""
    env = factory()
    try:
        measured = capital_episode_drift(env)
        print("environment_factory drift (bundled Qwen2.5 template):", measured)
        assert measured["prompt_drift"] > 0  # TRL's prompt is not the env's
        assert measured["completion_drift"] >= 0
    finally:
        env._close()
