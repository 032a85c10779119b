"""``tir/ToolUse-v0`` in chat mode: every tool's schema goes through the family's own ``tools=``
rendering, calls are written and parsed in the family's syntax, and the ledger equals the
family's reference render token for token (the chat conformance check of
``tests/test_chat_families.py``, for ToolUse's function, MCP and shipped tools).

References are built here independently of the env: PyPI ``renderers`` for Qwen3 (thinking
on/off) and Llama 3 (a stand-in vocabulary), ``mistral-common``'s own encoder for Mistral.
Raw text and the tokenizer's own template keep ToolUse's Hermes-style listing.
"""

from __future__ import annotations

import pytest

pytest.importorskip("renderers")
pytest.importorskip("mistral_common")

from tests.mcp_helpers import stdio_command  # noqa: E402
from tests.test_chat_families import encode, reference  # noqa: E402
from tir_envs.chat.vocab import family_tokenizer  # noqa: E402
from tir_envs.envs.tool_use import ToolUseEnv  # noqa: E402
from tir_envs.protocols.tool_use import DEFAULT_INSTRUCTIONS  # noqa: E402
from tir_envs.task import Task  # noqa: E402

CAPITALS = {"France": "Paris", "Japan": "Tokyo"}


def capital(country: str) -> str:
    """The capital city of a country.

    Args:
        country: the country's English name.
    """
    return CAPITALS[country]


def population(city: str, year: int = 2020) -> str:
    """A city's population.

    Args:
        city: the city's name.
        year: the census year.
    """
    return f"{city} had about 2.1 million people in {year}"


TASK = Task("t", "What is the capital of France?", "Paris")
FAMILIES = [("qwen3", "off"), ("qwen3", "on"), ("llama-3", None), ("mistral", None)]


def make(family, thinking, tools=(capital, population), tasks=(TASK,), **kw):
    return ToolUseEnv(tasks=list(tasks), tools=list(tools), tokenizer=family_tokenizer(family),
                      renderer=family, thinking=thinking, **kw)


def play(env, family, texts, ref):
    """Step ``texts``; every env turn must equal the reference's bridge.  Returns the info."""
    tok = env.tokenizer
    obs, _ = env.reset(options={"task": TASK})
    context, info = obs["tokens"].tolist(), {}
    for text in texts:
        completion = encode(tok, family, text)
        obs, reward, term, trunc, info = env.step(completion)
        env_ids = obs["tokens"].tolist()
        if env_ids:
            expected = list(ref.bridge(context, completion, env.chat.last_messages))
            assert env_ids == expected, (tok.decode(env_ids), tok.decode(expected))
        context = context + completion + env_ids
        if term or trunc:
            break
    traj = env.trajectory
    assert traj.prompt_ids + traj.token_ids == context
    return info


@pytest.mark.parametrize("family,thinking", FAMILIES,
                         ids=[f"{f}-{t or 'na'}" for f, t in FAMILIES])
def test_schemas_go_through_the_family_and_the_ledger_equals_its_render(family, thinking):
    env = make(family, thinking)
    try:
        assert env.chat.native  # the family renders the tools and parses the calls
        schemas = env.protocol.tool_schemas()
        assert [s["function"]["name"] for s in schemas] == ["capital", "population"]
        messages = env.protocol.prompt(TASK, True)
        assert messages[0] == {"role": "system", "content": DEFAULT_INSTRUCTIONS}  # no listing
        ref = reference(env.tokenizer, family, thinking)
        obs, _ = env.reset(options={"task": TASK})
        assert obs["tokens"].tolist() == list(ref.prompt(messages, schemas))
        prompt = env.codec.decode(obs["tokens"])
        assert '"country"' in prompt and "the census year" in prompt  # the schemas, rendered
        assert "as JSON signatures" not in prompt  # ToolUse's own listing is gone
        call = env.protocol.render_call("capital", "France")
        assert '"country"' in call  # the function's own argument, in the family's syntax
        info = play(env, family, [call, env.protocol.render_answer("Paris")], ref)
        traj = info["trajectory"]
        assert traj.turns[0].status == "ok" and traj.num_tool_calls == 1
        assert "Paris" in env.codec.decode(traj.token_ids[slice(*traj.turns[0]
                                                                 .observation_span)])
        assert traj.correct and traj.reward == pytest.approx(1.0)
    finally:
        env.close()


@pytest.mark.parametrize("family,thinking", [("qwen3", "off"), ("llama-3", None),
                                             ("mistral", None)])
def test_several_calls_in_one_turn_and_a_malformed_call(family, thinking):
    env = make(family, thinking)
    try:
        r = env.chat.renderer
        calls = [("capital", {"country": "Japan"}),
                 ("population", {"city": "Tokyo", "year": 2015})]
        if family == "llama-3":  # its template has one call per assistant message
            calls = calls[1:]
        both = r.render_calls(calls)
        broken = r.render_calls([("capital", {"country": "France"})]).replace("}", "", 1)
        ref = reference(env.tokenizer, family, thinking)
        ref.prompt(env.protocol.prompt(TASK, True), env.protocol.tool_schemas())
        info = play(env, family, [both, broken, env.protocol.render_answer("Tokyo")], ref)
        traj = info["trajectory"]
        first = traj.turns[0]
        assert [c["tool"] for c in first.tool_results] == [name for name, _ in calls]
        assert all(c["status"] == "ok" for c in first.tool_results)
        assert traj.turns[1].status != "ok"  # the malformed call is an observation, not a crash
        assert not traj.correct  # Tokyo is not the capital of France
    finally:
        env.close()


def test_mcp_schemas_listed_at_make_go_through_the_family(tmp_path):
    pytest.importorskip("mcp", reason="the mcp extra is part of make test")
    from tir_envs.tools.mcp_tools import McpTools

    server = McpTools(stdio_command(tmp_path), include=["add", "echo"])
    env = make("qwen3", "off", tools=[server])
    try:
        schemas = env.protocol.tool_schemas()
        assert {s["function"]["name"] for s in schemas} == {"add", "echo"}
        assert schemas == server.schemas()  # as listed by the server, passed on unchanged
        ref = reference(env.tokenizer, "qwen3", "off")
        obs, _ = env.reset(options={"task": TASK})
        assert obs["tokens"].tolist() == list(ref.prompt(env.protocol.prompt(TASK, True),
                                                         schemas))
        call = env.chat.renderer.render_calls([("add", {"a": 2, "b": 3})])
        info = play(env, "qwen3", [call, env.protocol.render_answer("Paris")], ref)
        traj = info["trajectory"]
        assert traj.turns[0].tool_results[0]["status"] == "ok"
        assert "5" in env.codec.decode(traj.token_ids)
        assert traj.correct
    finally:
        env.close()
        server.close()


def test_the_shipped_sql_tool_through_llama3():
    env = make("llama-3", None, tools=["sql"])
    try:
        (schema,) = env.protocol.tool_schemas()
        assert schema["function"]["name"] == "sql"
        call = env.protocol.render_call("sql", "SELECT 1")
        assert '"query"' in call and env.protocol.format.parse(call)[0].arguments == \
            {"query": "SELECT 1"}
    finally:
        env.close()


@pytest.mark.parametrize("kwargs", [{"chat": False}, {}], ids=["raw-text", "own-template"])
def test_raw_text_and_the_tokenizers_own_template_keep_the_listing(kwargs):
    env = ToolUseEnv(tasks=[TASK], tools=[capital], **kwargs)
    try:
        assert env.chat is None or not env.chat.native
        obs, _ = env.reset(options={"task": TASK})
        prompt = env.codec.decode(obs["tokens"])
        assert "as JSON signatures" in prompt and '"country"' in prompt
        *_, info = env.step('<tool_call>{"name": "capital", "arguments": {"country": '
                            '"France"}}</tool_call>')
        assert info["turn"].status == "ok"
    finally:
        env.close()


@pytest.mark.parametrize("family,thinking", [("qwen3", "on"), ("llama-3", None)])
def test_the_audit_holds_on_tooluse_in_a_family(family, thinking):
    """The audit writes its calls and answers the family's way (``FamilyFormat``) and every
    probe that applies holds, reasoning probes included where the family has a block."""
    from tir_envs.audit import HELD, NOT_APPLICABLE, PROBES, audit
    tasks = [{"question": "What is the capital of France?", "answer": "Paris"},
             {"question": "What is the capital of Japan?", "answer": "Tokyo"}]
    probes = [p for p in PROBES if p.family in ("format", "reasoning", "degenerate", "copy")]
    report = audit(lambda: make(family, thinking, tools=[capital], tasks=tasks), tasks=2,
                   probes=probes)
    assert set(report.verdicts().values()) <= {HELD, NOT_APPLICABLE}, report.to_markdown()
    ran = {n for n, v in report.verdicts().items() if v == HELD}
    assert "format.answer_in_tool_input" in ran and "degenerate.only_call" in ran
    assert ("reasoning.call_inside" in ran) == (thinking == "on")
