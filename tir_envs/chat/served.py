"""Serving's view of an episode: the conversation re-rendered by the family's template.

The env's ledger never re-renders history: the next prompt is the previous one, the sampled
completion byte for byte, then the env's tokens.  A model behind a chat API sees something
else: every request re-renders the whole conversation with the family's chat template, and
templates rewrite earlier assistant turns (Qwen3 and GLM-4.5 drop the reasoning of turns
before the last user message and re-space the rest, ``<think>x</think>`` becoming
``<think>\\nx\\n</think>\\n\\n``).  ``served_prompt`` is that view, for evaluating a model the
way it will be served (``tir-envs bench --as-served``): the policy is given the re-rendered
conversation, the env keeps its ledger (rewards read it as always), and the tokens where the
two differ are recorded on the trajectory (``metadata["served"]``).

The conversation is the episode's (kept by its chat binding): the protocol's prompt messages, each assistant turn as the
text the policy sampled (its end-of-turn id dropped; reasoning and call text inside it, as a
client that sends back what it received), and the env's messages after it (as framed, after
the observation budget's cut).  The template: the tokenizer's own ``chat_template`` when it
has one (what a serving stack applies); otherwise the family's renderer from PyPI
``renderers`` with the template's own retention of reasoning (extra ``chat``).
"""

from __future__ import annotations

import difflib
from typing import Any, Callable, Sequence

from tir_envs.chat.renderer import Message

Render = Callable[[list[Message], "list[dict] | None"], list[int]]


def served_prompt(env: Any, ledger_ids: Sequence[int]) -> list[int]:
    """The prompt a server would give the policy now (``env`` is the base env, at the start of
    a generation), with its drift from ``ledger_ids`` recorded by the running episode
    (``Episode.served_prompt``: the episode owns its conversation and its ledger)."""
    check_servable(env)
    return env.episode.served_prompt(ledger_ids)


def check_servable(env: Any) -> Any:
    """``env``'s chat binding, or an error saying why the env cannot be evaluated as served."""
    binding = getattr(env, "chat", None)
    if binding is None:
        raise ValueError(f"as-served evaluation re-renders a chat conversation; "
                         f"{type(env).__name__} runs raw text (no chat template to serve it "
                         "with): evaluate it without --as-served")
    if not binding.frames_turns():
        raise ValueError("as-served evaluation needs observations as chat messages (a server "
                         "cannot write a tool result inside the assistant's turn): pass the env "
                         "argument observation_role='tool' (or 'user')")
    binding.serving_render()  # a family with no serving template: refused now
    return binding


def serving_renderer(renderer: Any) -> Render:
    """``(messages, tools) -> ids`` with the generation prompt, as a server renders them."""
    tok = renderer.tokenizer
    # the date the env's prompt states (Llama 3: the template's, or the run's TIR_CHAT_DATE)
    date = getattr(renderer, "date", None)
    dated = {"date_string": date.strftime("%d %b %Y")} if date and \
        renderer.family == "llama-3" else {}
    if getattr(tok, "chat_template", None):
        def apply(messages: list[Message], tools: list[dict] | None) -> list[int]:
            kwargs = {"enable_thinking": renderer.thinking == "on"} if renderer.thinking else {}
            kwargs.update(dated)
            text = tok.apply_chat_template(messages, tools=tools, tokenize=False,
                                           add_generation_prompt=True, **kwargs)
            return list(tok.encode(text, add_special_tokens=False))
        return apply
    from tir_envs.chat.adapter import RENDERERS_FAMILIES, _require_renderers
    if renderer.family not in RENDERERS_FAMILIES:
        raise ValueError(f"no serving template for the {renderer.family} renderer: the "
                         "tokenizer has no chat_template and PyPI 'renderers' has no such "
                         f"family (it has {', '.join(RENDERERS_FAMILIES)}); pass the model's "
                         "own tokenizer, whose chat_template a server would apply")
    configs = _require_renderers()
    import renderers

    name, _, switch = RENDERERS_FAMILIES[renderer.family]
    kwargs = {"enable_thinking": renderer.thinking == "on"} if switch else {}
    kwargs.update(dated)
    impl = renderers.create_renderer(tok, getattr(configs, name)(**kwargs))
    return lambda messages, tools: list(impl.render_ids(messages, tools=tools,
                                                        add_generation_prompt=True))


def drift(ledger: Sequence[int], served: Sequence[int]) -> tuple[int, int]:
    """``(ledger_only, served_only)``: tokens of the ledger's context the served prompt lacks
    (dropped or rewritten), and tokens only the served prompt has."""
    matcher = difflib.SequenceMatcher(None, list(ledger), list(served), autojunk=False)
    same = sum(block.size for block in matcher.get_matching_blocks())
    return len(ledger) - same, len(served) - same
