"""``Budgets``: every limit of an episode in one object.

A protocol states its paper's defaults (``Protocol.budgets``); the env's constructor keywords
override single fields (``Budgets.merged``), and the result is the one budget the running
episode is held to: turns, tool calls (per tool and per action), tool seconds, observation
tokens and the token caps.  One object, so a limit is never read from two places that could
disagree (the env, the protocol's state and the tool runner all read this one).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

from tir_envs.validation import check_positive_int, check_positive_number

#: calls executed per action unless ``max_calls_per_turn`` says otherwise: one action may not
#: queue hundreds of calls (each up to its tool's timeout) into one step
MAX_CALLS_PER_TURN = 16
#: seconds an episode's tool calls may take in all, unless ``max_tool_seconds`` says otherwise
MAX_TOOL_SECONDS = 600.0


@dataclass(frozen=True)
class Budgets:
    """The limits of one episode (docs/concepts.md, "Budgets").

    * ``max_turns``: the most actions.  An action at the last turn that still calls a tool is
      not executed and the episode is truncated (``max_turns``).
    * ``max_tool_calls``: executed calls per tool over the episode (an int for every tool, a
      dict by tool name, or ``None`` for no cap beyond ``max_turns``); once spent the env shows
      its exhaustion notice and executes nothing more.
    * ``max_calls_per_turn``: calls executed per action; further calls are ignored.
    * ``max_tool_seconds``: seconds the episode's tool calls may take in all (waiting for the
      policy does not count); a call running when it is spent is stopped (``timeout``) and the
      episode is truncated (``max_time``).
    * ``max_obs_tokens``: observation tokens per turn, cut in the middle (head and tail kept).
    * ``max_total_tokens``: prompt + episode tokens; reaching it truncates the episode
      (``max_tokens``), and an action longer than what is left is cut to fit.
    * ``max_response_tokens``: episode tokens after the prompt (policy and env tokens), a
      second cap for protocols whose authors budget the response (ToRL: 3072); ``None``: only
      ``max_total_tokens`` counts.
    """

    max_turns: int = 4
    max_tool_calls: int | Mapping[str, int] | None = None
    max_obs_tokens: int = 512
    max_total_tokens: int = 8192
    #: tokens after the prompt (None: only ``max_total_tokens`` counts)
    max_response_tokens: int | None = None
    max_calls_per_turn: int = MAX_CALLS_PER_TURN
    max_tool_seconds: float = MAX_TOOL_SECONDS

    def merged(self, **given: Any) -> "Budgets":
        """These budgets with the given fields overridden (``None``: keep this default;
        ``max_response_tokens=False``: no response cap), checked before any episode runs."""
        unknown = sorted(set(given) - {f.name for f in fields(self)})
        if unknown:
            raise TypeError(f"unknown budget(s) {unknown}; budgets are "
                            f"{[f.name for f in fields(self)]}")
        check_positive_int(allow_none=True, **{k: given.get(k) for k in (
            "max_turns", "max_obs_tokens", "max_total_tokens", "max_calls_per_turn")})
        check_positive_number(unit="seconds", allow_none=True,
                              max_tool_seconds=given.get("max_tool_seconds"))
        out = replace(self, **{k: v for k, v in given.items() if v is not None})
        response = out.max_response_tokens
        out = replace(out, max_response_tokens=_response_budget(response),
                      max_tool_seconds=float(out.max_tool_seconds))
        check_positive_int(max_turns=out.max_turns, max_obs_tokens=out.max_obs_tokens,
                           max_total_tokens=out.max_total_tokens,
                           max_calls_per_turn=out.max_calls_per_turn)
        return out

    def tool_budget(self, name: str) -> int | None:
        """Calls of tool ``name`` allowed per episode (``None``: unlimited)."""
        if isinstance(self.max_tool_calls, Mapping):
            return self.max_tool_calls.get(name)
        return self.max_tool_calls

    def tokens_left(self, prompt_tokens: int, episode_tokens: int) -> int:
        """Tokens the ledger may still take, under both token caps."""
        left = self.max_total_tokens - prompt_tokens - episode_tokens
        if self.max_response_tokens is not None:
            left = min(left, self.max_response_tokens - episode_tokens)
        return left


def _response_budget(value: int | None | bool) -> int | None:
    """``max_response_tokens`` checked: a positive int, or ``None``/``False`` for no cap."""
    if value is None or value is False:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_response_tokens must be a positive int, or False for no response "
                         f"cap beside max_total_tokens; got {value!r}")
    return value
