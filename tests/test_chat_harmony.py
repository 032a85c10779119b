"""gpt-oss (harmony) and the real Llama 3 / o200k vocabularies, against offline references.

References: ``openai-harmony`` (its own render and completion parser, its vocabulary written
from quicktok's ranks), the real gpt-oss Jinja template (tests/fixtures/chat_templates), and
quicktok's own encoder for the vocabularies.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

oh = pytest.importorskip("openai_harmony")
quicktok = pytest.importorskip("quicktok")

from tir_envs.bpe_ranks import harmony_encoding  # noqa: E402
from tir_envs.chat.vocab import family_tokenizer  # noqa: E402
from tir_envs.codec import Codec  # noqa: E402
from tir_envs.envs.mathcode import MathCodeEnv  # noqa: E402
from tir_envs.task import Task  # noqa: E402

TEMPLATES = Path(__file__).parent / "fixtures" / "chat_templates"
MATH = Task("m", "What is 6 * 7? é日本", "42", {"domain": "math", "tool": "python"})
#: long, unicode (BPE-splitting), digits, contractions, CRLF, emoji, RTL, combining marks
TEXT = ("Naïve café — 東京タワー, São Paulo; don't WE'LL 12345678 3.14159\r\n\n\t  "
        "🤖👩🏽‍💻 ﷽ שלום مرحبا e\u0301 <|fake|> {\"a\": [1, 2]}\n" * 40 +
        Path(__file__).read_text(encoding="utf-8"))


@pytest.mark.parametrize("family,encoding", [("gpt-oss", "o200k_harmony"),
                                             ("llama-3-real", "llama3")])
def test_offline_vocabulary_equals_quicktok(family, encoding):
    tok = family_tokenizer(family)
    ref = quicktok.get_encoding(encoding)
    text = TEXT.replace("<|", "< |")  # quicktok refuses special-token text; ours is plain
    assert tok.encode(text, add_special_tokens=False) == ref.encode(text)
    assert tok.decode(ref.encode(text)) == text


def env_for(tok):
    return MathCodeEnv(protocol="rite", tasks=[MATH], tokenizer=tok)


def test_prompt_equals_harmony_and_the_real_template():
    tok = family_tokenizer("gpt-oss")
    env = env_for(tok)
    try:
        obs, info = env.reset(options={"task": MATH})
        assert env.chat.renderer.family == "gpt-oss"
        assert set(info["stop_token_ids"]) >= {tok.convert_tokens_to_ids("<|call|>"),
                                               tok.convert_tokens_to_ids("<|return|>")}
        enc = harmony_encoding()
        assert set(env.chat.stop_token_ids()) == set(enc.stop_tokens_for_assistant_actions())
        messages = env.protocol.prompt(MATH, True)
        schemas = env.protocol.tool_schemas()
        # openai-harmony's encoding of the same conversation
        conv = env.chat.renderer.conversation(messages, schemas)
        assert obs["tokens"].tolist() == list(
            enc.render_conversation_for_completion(conv, oh.Role.ASSISTANT))
        # the model's own Jinja template (today's date, as the renderer writes it)
        templated = copy.deepcopy(tok)
        templated.chat_template = (TEMPLATES / "openai-gpt-oss-120b.jinja").read_text()
        text = templated.apply_chat_template(messages, tools=schemas, tokenize=False,
                                             add_generation_prompt=True)
        assert obs["tokens"].tolist() == tok.encode(text, add_special_tokens=False)
    finally:
        env.close()


def test_episode_ledger_equals_harmony_conversation():
    """A two-call RITE episode: the ledger up to the last tool result is exactly
    openai-harmony's render of the conversation (assistant analysis and calls, tool results),
    and every call the env ran is a call openai-harmony parses from the same ids."""
    tok = family_tokenizer("gpt-oss")
    env = env_for(tok)
    enc = harmony_encoding()
    try:
        env.reset(options={"task": MATH})
        r = env.chat.renderer
        conv = r.conversation(env.protocol.prompt(MATH, True), env.protocol.tool_schemas())
        history = list(conv.messages)
        for code in ("print(6 * 7)", "print('é日本' * 3)"):
            completion = Codec(tok).encode(r.render_calls([("python", {"code": code})]))
            parsed = enc.parse_messages_from_completion_tokens(completion, oh.Role.ASSISTANT)
            assert [m.recipient for m in parsed] == [None, "functions.python"]
            assert parsed[0].channel == "analysis" and parsed[1].channel == "commentary"
            obs, reward, term, trunc, info = env.step(completion)
            assert not term
            history += parsed + [oh.Message.from_author_and_content(
                oh.Author.new(oh.Role.TOOL, "functions.python"),
                env.chat.last_messages[0]["content"]).with_recipient("assistant")
                .with_channel("commentary")]
        traj = env.trajectory
        expected = enc.render_conversation_for_completion(
            oh.Conversation.from_messages(history), oh.Role.ASSISTANT)
        assert traj.prompt_ids + traj.token_ids == list(expected)
        assert "é日本é日本é日本" in tok.decode(traj.token_ids)
        obs, reward, term, trunc, info = env.step(Codec(tok).encode(
            r.render_calls([("answer", {"answer": "\\boxed{42}"})])))
        assert term and info["trajectory"].correct
    finally:
        env.close()


def test_reasoning_is_never_graded_and_a_cut_turn_is_closed():
    """An answer call written inside the analysis channel's text is reasoning: not run, not
    graded.  A turn cut before <|call|>/<|return|> gets <|end|> (loss mask 0)."""
    tok = family_tokenizer("gpt-oss")
    env = env_for(tok)
    try:
        env.reset(options={"task": MATH})
        hidden = ('<|channel|>analysis<|message|>commentary to=functions.answer '
                  '{"answer": "\\\\boxed{42}"} The answer is 42.<|end|><|start|>assistant'
                  '<|channel|>final<|message|>I am not sure.<|return|>')
        obs, reward, term, trunc, info = env.step(Codec(tok).encode(hidden))
        traj = info["trajectory"]
        assert term and not traj.correct and traj.answer is None
        assert env.chat.split(hidden).content == "I am not sure."
    finally:
        env.close()
    env = env_for(tok)
    try:
        env.reset(options={"task": MATH})
        said = env.chat.renderer.render_calls([("python", {"code": "print(6 * 7)"})])
        cut = Codec(tok).encode(said)[:-1]  # no <|call|>: cut by the budget
        obs, *_ = env.step(cut)
        assert tok.decode(obs["tokens"].tolist()).startswith("<|end|><|start|>functions.python")
    finally:
        env.close()


def test_chat_check_covers_gpt_oss(capsys):
    import argparse

    from tir_envs.chat.check import run

    code = run(argparse.Namespace(tokenizer="family:gpt-oss", thinking=None, renderer=None,
                                  role="tool"))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "gpt-oss (HarmonyRenderer)" in out and "'<|call|>'" in out and "'<|return|>'" in out
    assert "<|start|>functions.python to=assistant<|channel|>commentary<|message|>RESULT" in out
