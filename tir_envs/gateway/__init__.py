"""An OpenAI- and Anthropic-compatible gateway: train black-box agents on token-exact ledgers.

Point any agent program's ``base_url`` at a ``Gateway`` and every request it makes is rendered
with the model family's serving template, generated **from token ids** by a tir_envs policy
(vLLM, transformers, an OpenAI-compatible server with ids, scripted) with the run's sampling
settings, and parsed back with the family's parser into tool calls and reasoning.  Each episode
keeps a ledger of trainable segments (``Trajectory``: sampled tokens mask 1 with logprobs, what
the gateway inserted mask 0); where the client rewrote history the episode forks a new segment
and records why (``docs/gateway.md``).

Public API::

    Gateway(policy, *, tokenizer=None, renderer=None, thinking=None, sampling=None,
            model="tir-policy", aliases=(), reward=None, protocol=None, host="127.0.0.1", port=0,
            max_body_bytes=8 MiB, allowed_origins=(), render=None, admin_token=None,
            side_segments="skip", max_episodes=65536, idle_timeout_s=900.0,
            keep_expired=True)
        async with Gateway(...) as gw:           # or await gw.start() / await gw.aclose()
            base_url, api_key = gw.open_episode(task)   # base_url ends in /v1
            ...                                   # the agent calls base_url with api_key
            result = await gw.finish(api_key, agent_answer=None, error=None)
        gw.url (http://127.0.0.1:PORT), gw.episodes (open ones, by key), gw.on_finish (hooks
        called with each EpisodeResult, expired ones included), gw.engine (policy, renderer,
        render, sampling), gw.expire_idle() (what the reaper runs), gw.stats()
        open_episode beyond max_episodes: GatewayFull; an episode idle for idle_timeout_s
        expires: its segments flagged infra_failed (timeout), finish(key) returns them
    GatewayPool(make_policy, *, workers=2, reward=None, protocol=None, **gateway_kwargs)
        the same API over `workers` processes (open_episode/finish are coroutines; each
        episode's base_url is its worker's; rewards scored on the host); await pool.stats()
    EpisodeResult: key_id, task, trajectories (one Trajectory per trainable segment), reward,
        forks (list[Fork]), breaks, calls, overrides (client sampling fields replaced: count),
        conversation (last request + final completion), answer (the policy's final content),
        agent_answer (what the agent returned: recorded, never graded), error,
        side_trajectories (segments of side conversations), tool_calls (the policy's calls),
        client_tools (the client's claims about its tools: results, errors, flagged, unmatched)
    Fork: segment, parent, at (first differing token), parent_tokens, request_tokens,
        ledger_text, request_text (decoded around ``at``), reason, cause (client_rewrite,
        template_rule or side_conversation; ``rewrite``: one of the first two)
    AgentSource(gateway, agent, *, concurrency=64, timeout_s=None)
        async for result in source.run(tasks): ...         # EpisodeResult, as each finishes
        await source.collect(tasks) -> list[EpisodeResult]
        await source.groups(tasks, samples_per_task) -> list[list[Trajectory]] (GRPO groups)
    agent: async def agent(task, base_url, api_key) -> answer | None

Modules: ``server`` (Gateway, routes, guards), ``episode`` (one episode: render, place,
generate, parse), ``ledger`` (segments and forks), ``conversation`` (the wire-neutral messages,
completions parsed back), ``render`` (the serving render encoded piece by piece),
``library_families`` (gpt-oss through openai-harmony, Mistral through mistral-common),
``chat_completions`` / ``responses`` / ``anthropic_messages`` (one per wire API), ``sse``,
``handles`` (the gateway's own reasoning signatures), ``rewards`` (host-side), ``source``
(AgentSource), ``pool`` (GatewayPool: worker processes), ``cli`` (``tir-envs serve gateway``).

Rewards (``reward=``): a ``tir_envs.rewards.Reward`` graded on the answer ``protocol=`` reads
(``protocol.read(task, [text])``) in the policy's final completion,
or ``f(task, conversation) -> float`` (sync or async); never anything the agent sends.
Routes: ``/v1/chat/completions``, ``/v1/responses``, ``/v1/messages`` (``?beta=true``),
``/v1/messages/count_tokens``, ``/v1/models``, ``HEAD /``; each also under ``/e/{api_key}``.
CLI: ``tir-envs serve gateway`` (``tir_envs.gateway.cli``).
"""

from typing import Any

#: public name -> module; imported on first use (``tir-envs serve --help`` loads no server)
_EXPORTS = {"AgentSource": "source", "Completion": "episode", "EpisodeLedger": "ledger",
            "EpisodeResult": "episode", "Fork": "ledger", "Gateway": "server",
            "GatewayFull": "server", "GatewayPool": "pool", "Segment": "ledger"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'tir_envs.gateway' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"tir_envs.gateway.{_EXPORTS[name]}"), name)
