"""The chat conformance matrix: family x thinking x env x episode shape.

For every cell the env's ledger must equal the reference renderer's own render of the prompt and
its own bridge after every sampled completion, token for token, and the loss mask must be 1
exactly on the sampled tokens.  References, built here independently of the env:
  * ``renderers`` (PyPI) for Qwen3 (thinking on/off), Llama 3, DeepSeek V3 and R1, GLM-4.5
    (on/off);
  * ``mistral-common``'s own encoder for Mistral (also over whole conversations);
  * ``apply_chat_template`` of the whole conversation for the bundled ChatML (the tool output
    in it encoded on its own, as the ledger contract says).
  * ``openai-harmony`` for gpt-oss (its own render of the prompt and of each tool message).
Vocabularies: Qwen3, Mistral, gpt-oss (o200k harmony) and ``llama-3-real`` (Llama 3's, from
quicktok's rank files) are real; ``llama-3``, DeepSeek V3 and R1, GLM-4.5 are stand-ins
(``tir_envs.chat.vocab``).  The default run samples the matrix (every family and shape, envs
rotated); ``TIR_CHAT_MATRIX=full`` runs all of it.
"""

from __future__ import annotations

import itertools
import os

import pytest

pytest.importorskip("renderers")
pytest.importorskip("mistral_common")

import renderers  # noqa: E402
from renderers import configs  # noqa: E402

from tests.search_helpers import small_index  # noqa: E402
from tests.sql_helpers import CACHE  # noqa: E402
from tir_envs.chat.vocab import family_tokenizer  # noqa: E402
from tir_envs.codec import Codec  # noqa: E402
from tir_envs.data.spider import load_spider  # noqa: E402
from tir_envs.task import Task  # noqa: E402
from tir_envs.envs.autotir import AutoTIREnv  # noqa: E402
from tir_envs.envs.mathcode import MathCodeEnv  # noqa: E402
from tir_envs.envs.search import SearchEnv  # noqa: E402
from tir_envs.envs.sql import SQLEnv  # noqa: E402
from tir_envs.tools.search import open_retriever  # noqa: E402

FAMILIES = [("chatml", None), ("qwen3", "off"), ("qwen3", "on"), ("llama-3", None),
            ("llama-3-real", None), ("mistral", None), ("gpt-oss", None), ("deepseek-v3", None),
            ("deepseek-r1", None), ("glm-4.5", "on"), ("glm-4.5", "off")]
#: offline vocabularies that are a family's real one under another name
RENDERER = {"chatml": "template", "llama-3-real": "llama-3"}
ENVS = ["rite", "autotir", "search", "sql"]
SHAPES = ["answer", "calls", "obs_cut", "reason_cut", "malformed"]
FULL = os.environ.get("TIR_CHAT_MATRIX") == "full"


def cells():
    for (i, (fam, th)), shape in itertools.product(enumerate(FAMILIES), SHAPES):
        envs = ENVS if FULL else [ENVS[(i + SHAPES.index(shape)) % len(ENVS)], "rite"]
        for env in dict.fromkeys(envs):
            yield pytest.param(fam, th, env, shape, id=f"{fam}-{th or 'na'}-{env}-{shape}")


# ---------------------------------------------------------------- references
class RenderersRef:
    CONFIGS = {"qwen3": "Qwen3RendererConfig", "llama-3": "Llama3RendererConfig",
               "deepseek-v3": "DeepSeekV3RendererConfig",
               "deepseek-r1": "DeepSeekR1RendererConfig", "glm-4.5": "GLM45RendererConfig"}

    def __init__(self, tok, family, thinking):
        kw = {"thinking_retention": "all"}
        if thinking:
            kw["enable_thinking"] = thinking == "on"
        self.r = renderers.create_renderer(tok, getattr(configs, self.CONFIGS[family])(**kw))

    def prompt(self, messages, tools):
        self.tools = tools
        return self.r.render_ids(messages, tools=tools, add_generation_prompt=True)

    def bridge(self, context, completion, messages):
        out = self.r.bridge_to_next_turn(context, completion, messages, tools=self.tools)
        assert out is not None and out.token_ids[:len(context) + len(completion)] == \
            context + completion
        return out.token_ids[len(context) + len(completion):]


class MistralRef:
    def __init__(self, tok, family, thinking):
        self.m = tok.tokenizer
        self.eos = self.m.instruct_tokenizer.tokenizer.eos_id

    def prompt(self, messages, tools):
        from mistral_common.protocol.instruct.request import ChatCompletionRequest
        return self.m.encode_chat_completion(
            ChatCompletionRequest(messages=messages, tools=tools or None)).tokens

    def bridge(self, context, completion, messages):
        from mistral_common.protocol.instruct.messages import ToolMessage
        out = [] if completion and completion[-1] == self.eos else [self.eos]
        for m in messages:
            msg = ToolMessage(content=m["content"], tool_call_id=m.get("tool_call_id")
                              or "000000000")
            out += self.m.instruct_tokenizer.encode_tool_message(msg, False)[0]
        return out


class TemplateRef:
    """The bundled ChatML: the whole conversation through ``apply_chat_template``."""

    def __init__(self, tok, family, thinking):
        self.tok = tok

    def prompt(self, messages, tools):
        self.messages = list(messages)
        return self.tok.encode(self.tok.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True), add_special_tokens=False)

    def bridge(self, context, completion, messages):
        said = self.tok.decode(completion, skip_special_tokens=False)
        eos = self.tok.eos_token
        content = said[:-len(eos)] if said.endswith(eos) else said
        self.messages += [{"role": "assistant", "content": content}, *messages]
        full = self.tok.apply_chat_template(self.messages, tokenize=False,
                                            add_generation_prompt=True)
        done = self.tok.apply_chat_template(self.messages[:-len(messages)], tokenize=False)
        end = done.rindex(content) + len(content)
        glue = full[end:]
        if said.endswith(eos) and glue.startswith(eos):
            glue = glue[len(eos):]
        # the template's text encoded whole, as a server encodes it (the tool outputs here
        # spell no added token, so the untrusted encoding changes nothing)
        body = "".join(m["content"] for m in messages)
        assert body in glue and Codec(self.tok).encode_untrusted(body) == \
            self.tok.encode(body, add_special_tokens=False)
        return self.tok.encode(glue, add_special_tokens=False)


class HarmonyRef:
    """gpt-oss: openai-harmony's own render of the prompt and of each tool message."""

    def __init__(self, tok, family, thinking):
        import openai_harmony as oh

        from tir_envs.bpe_ranks import harmony_encoding
        self.oh, self.enc, self.tok = oh, harmony_encoding(), tok
        self.stops = set(self.enc.stop_tokens_for_assistant_actions())

    def prompt(self, messages, tools):
        import datetime as dt
        oh = self.oh
        system = oh.SystemContent.new().with_conversation_start_date(dt.date.today().isoformat())
        head = [oh.Message.from_role_and_content(oh.Role.SYSTEM, system)]
        if messages[0]["role"] == "system" or tools:
            dev = oh.DeveloperContent.new()
            if messages[0]["role"] == "system":
                dev = dev.with_instructions(messages[0]["content"])
            if tools:
                dev = dev.with_function_tools([oh.ToolDescription.new(
                    t["function"]["name"], t["function"]["description"],
                    parameters=t["function"]["parameters"]) for t in tools])
            head.append(oh.Message.from_role_and_content(oh.Role.DEVELOPER, dev))
        conv = oh.Conversation.from_messages(head + [
            oh.Message.from_role_and_content(oh.Role.USER, m["content"]) for m in messages
            if m["role"] == "user"])
        return list(self.enc.render_conversation_for_completion(conv, oh.Role.ASSISTANT))

    def bridge(self, context, completion, messages):
        oh = self.oh
        out = [] if completion and completion[-1] in self.stops else \
            [self.tok.convert_tokens_to_ids("<|end|>")]
        conv = oh.Conversation.from_messages([oh.Message.from_author_and_content(
            oh.Author.new(oh.Role.TOOL, f"functions.{m.get('name') or 'tool'}"), m["content"])
            .with_recipient("assistant").with_channel("commentary") for m in messages])
        return out + list(self.enc.render_conversation_for_completion(conv, oh.Role.ASSISTANT))


REFS = {"chatml": TemplateRef, "mistral": MistralRef, "gpt-oss": HarmonyRef}


def reference(tok, family, thinking):
    return REFS.get(family, RenderersRef)(tok, RENDERER.get(family, family), thinking)


# ---------------------------------------------------------------- envs
MATH = Task("m", "What is 6 * 7?", "42", {"domain": "math", "tool": "python"})
QA = Task("q", "Which city is the capital of France?", ["Paris"],
          {"domain": "knowledge", "tool": "search"})


@pytest.fixture(scope="module")
def retriever():
    return open_retriever(small_index("bm25"))


def build(name, tok, family, thinking, retriever, obs_tokens):
    kw = dict(tokenizer=tok, renderer=RENDERER.get(family, family),
              thinking=thinking, max_obs_tokens=obs_tokens)
    if name == "rite":
        return MathCodeEnv(protocol="rite", tasks=[MATH], **kw), MATH
    if name == "autotir":
        return AutoTIREnv(tasks=[MATH], retriever=retriever, observation_role="tool",
                          **kw), MATH
    if name == "search":
        return SearchEnv(tasks=[QA], retriever=retriever, observation_role="tool", **kw), QA
    task = load_spider(["pets_1"])[0]
    return SQLEnv(tasks=[task], cache_dir=CACHE, observation_role="tool", **kw), task


#: a tool input whose output is long and multibyte (the observation budget cuts it mid-text)
LONG = {"python": "print('é日本' * 400)", "search": "capital of France",
        "sql": "SELECT 'é日本' || name FROM sqlite_master, Pets, Pets"}


def actions(env, name, shape):
    """The texts of the episode's completions for ``shape`` (the last may be cut short)."""
    p = env.protocol
    tool = {"rite": "python", "autotir": "python", "search": "search", "sql": "sql"}[name]
    gold = {"rite": "42", "autotir": "42", "search": "Paris", "sql": "SELECT count(*) FROM Pets"}
    body = {"python": "print(6 * 7)", "search": "capital of France",
            "sql": "SELECT count(*) FROM Pets"}[tool]
    answer = p.render_answer(gold[name])
    call = p.render_call(tool, body)
    if shape == "answer":
        return [answer]
    if shape == "calls":
        return [call, p.render_call(tool, body.replace("6", "7")), answer]
    if shape == "obs_cut":
        return [p.render_call(tool, LONG[tool]), answer]
    if shape == "malformed":
        broken = call.replace("}", "", 1) if "}" in call else call.replace("</", "<", 1)
        return [broken, answer]
    reasoning = env.chat.renderer.reasoning
    opener = reasoning.open if reasoning else ""
    return [opener + "Let me think about <answer> 42 </answer> and " + "more " * 30]


def encode(tok, family, text):
    """Ids as the model samples them: special tokens as their ids."""
    if family != "mistral":
        return tok.encode(text, add_special_tokens=False)
    inner = tok.tokenizer.instruct_tokenizer
    ids, specials = [], {"[TOOL_CALLS]": inner.TOOL_CALLS, "</s>": inner.tokenizer.eos_id}
    for piece in _split(text, list(specials)):
        ids += [specials[piece]] if piece in specials else \
            inner.tokenizer.encode(piece, bos=False, eos=False)
    return ids


def _split(text, marks):
    out, pos = [], 0
    while pos < len(text):
        hits = [(text.find(m, pos), m) for m in marks if text.find(m, pos) >= 0]
        if not hits:
            out.append(text[pos:])
            break
        i, m = min(hits)
        if i > pos:
            out.append(text[pos:i])
        out.append(m)
        pos = i + len(m)
    return out


@pytest.mark.parametrize("family,thinking,name,shape", list(cells()))
def test_ledger_equals_reference(family, thinking, name, shape, retriever):
    tok = family_tokenizer(family)
    env, task = build(name, tok, family, thinking, retriever, 48 if shape == "obs_cut" else 512)
    try:
        obs, info = env.reset(options={"task": task})
        ref = reference(tok, family, thinking)
        schemas = env.protocol.tool_schemas() if env.chat.native else None
        messages = env.protocol.prompt(task, True)
        assert obs["tokens"].tolist() == ref.prompt(messages, schemas)
        assert set(env.chat.stop_token_ids()) <= set(info["stop_token_ids"])
        context = obs["tokens"].tolist()
        mask = [0] * len(context)
        cut = 40 if shape == "reason_cut" else None
        for text in actions(env, name, shape):
            completion = encode(tok, family, text)[:cut]
            obs, reward, term, trunc, info = env.step(completion)
            mask += [1] * len(completion)
            env_ids = obs["tokens"].tolist()
            if env_ids:
                expected = ref.bridge(context, completion, env.chat.last_messages)
                assert env_ids == expected, (tok.decode(env_ids), tok.decode(expected))
                mask += [0] * len(env_ids)
            context = context + completion + env_ids
            if term or trunc:
                break
        traj = env.trajectory
        assert traj.prompt_ids + traj.token_ids == context
        assert [0] * len(traj.prompt_ids) + traj.loss_mask == mask
        if shape == "obs_cut" and env.chat.last_messages:
            assert any("truncated" in n or " cut " in n for t in traj.turns for n in t.notes)
        if shape == "reason_cut" and env.chat.renderer.reasoning:  # written while reasoning:
            assert not traj.correct                                 # never graded
    finally:
        env.close()


def test_mistral_whole_conversation_matches_mistral_common():
    """Independent of any bridge: the ledger of a two-call RITE episode is exactly what
    mistral-common encodes for the same conversation."""
    from mistral_common.protocol.instruct.request import ChatCompletionRequest

    tok = family_tokenizer("mistral")
    env = MathCodeEnv(protocol="rite", tasks=[MATH], tokenizer=tok)
    try:
        obs, _ = env.reset(options={"task": MATH})
        messages = list(env.protocol.prompt(MATH, True))
        calls = [("python", {"code": "print(6 * 7)"}), ("answer", {"answer": "\\boxed{42}"})]
        for i, (name, args) in enumerate(calls):
            text = env.protocol.format.renderer.render_calls([(name, args)])
            env.step(encode(tok, "mistral", text))
            call_id = f"call{0:05d}"
            messages.append({"role": "assistant", "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": name, "arguments": args}}]})
            if i == 0:
                messages.append({"role": "tool", "content": "42", "tool_call_id": call_id})
        # mistral-common serves conversations ending in a user or tool message: the ledger up to
        # the tool result is its encoding, then the answer turn as sampled
        expected = tok.tokenizer.encode_chat_completion(ChatCompletionRequest(
            messages=messages[:-1], tools=env.protocol.tool_schemas())).tokens
        traj = env.trajectory
        ledger = traj.prompt_ids + traj.token_ids
        assert ledger[:len(expected)] == expected
        assert ledger[len(expected):] == encode(tok, "mistral", env.protocol.format.renderer
                                                .render_calls([calls[1]]))
        assert traj.correct
    finally:
        env.close()


@pytest.mark.parametrize("family,thinking", [("qwen3", "on"), ("glm-4.5", "on"),
                                             ("deepseek-r1", None)])
def test_a_call_inside_reasoning_is_not_run(family, thinking):
    tok = family_tokenizer(family)
    env = MathCodeEnv(protocol="rite", tasks=[MATH], tokenizer=tok, renderer=family,
                      thinking=thinking)
    try:
        env.reset(options={"task": MATH})
        r = env.chat.renderer.reasoning
        call = env.protocol.format.render_call("answer", "\\boxed{42}")
        call = call[call.rfind(r.close) + len(r.close):] if r.close in call else call
        hidden = f"{r.open}{call} The answer is \\boxed{{42}}.{r.close}\nI am not sure yet."
        obs, reward, term, trunc, info = env.step(encode(tok, family, hidden))
        traj = info["trajectory"]
        assert term and not traj.correct and traj.answer is None
    finally:
        env.close()
