"""``Episode``: the running episode, owned by the env and handed to its parts.

Everything that lives from one ``reset`` to the next sits here, in one object: the task, the
ledger (``Trajectory``), what the protocol reads (``EpisodeState``), the tool sessions it
opened, the budget it is held to and what it has spent of it, the chat conversation (the
binding's, re-rendered by ``tir_envs.chat.served``) and whether it is over.  The env is the
Gymnasium face that builds one per reset and steps it; the parts (tools, the rubric, serving's
view) read and write the episode only through this object's methods, never through the env's
attributes, so no part reaches into another's state.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from tir_envs.codec import truncate_middle
from tir_envs.formats import ToolCall
from tir_envs.protocols.base import EpisodeState
from tir_envs.protocols.budgets import Budgets
from tir_envs.rewards.base import RewardResult
from tir_envs.status import Status
from tir_envs.task import Task
from tir_envs.tools.base import Tool, ToolResult, describe_exception
from tir_envs.trajectory import Trajectory, Turn
from tir_envs.untrusted import lone_surrogate

if TYPE_CHECKING:
    from tir_envs.chat.binding import ChatBinding

EXHAUSTED_NOTICE = "Tool call count has been exhausted. You can no longer call the tool."


class Episode:
    """One episode: task, ledger, protocol state, tool sessions, budget spent, done flag.

    ``budget`` is the env's one ``Budgets``; ``tools`` the env's tools by name (their sessions
    are this episode's and closed by ``close_sessions``); ``chat`` the env's chat binding
    (``None`` for raw text), whose conversation is this episode's.
    """

    def __init__(self, task: Task, trajectory: Trajectory, state: EpisodeState,
                 budget: Budgets, tools: Mapping[str, Tool], chat: "ChatBinding | None" = None,
                 exhausted_notice: str = EXHAUSTED_NOTICE, marker_ids: Sequence[int] = ()):
        self.task, self.trajectory, self.state = task, trajectory, state
        self.budget, self.tools, self.chat = budget, tools, chat
        self.codec = state.codec
        self.exhausted_notice = exhausted_notice
        self._marker_ids = list(marker_ids)  # what a middle cut of an observation leaves
        self.sessions: dict[str, Any] = {}
        self.tool_seconds = 0.0  # spent by this episode's calls
        self.done = False

    # ------------------------------------------------------------------ what it reads
    @property
    def answer(self) -> Any:
        """The protocol's one reading of the answer (``None`` until the episode ends)."""
        return self.state.answer

    @property
    def conversation(self) -> list[dict[str, Any]]:
        """The episode as a chat API holds it (the binding's messages; ``[]`` for raw text)."""
        return self.chat.conversation if self.chat is not None else []

    def tokens_left(self) -> int:
        """Tokens the ledger may still take (both token caps)."""
        t = self.trajectory
        return self.budget.tokens_left(len(t.prompt_ids), len(t.token_ids))

    def limit_reached(self) -> str | None:
        """The budget an unfinished episode has run into (its stop reason), or ``None``."""
        if len(self.trajectory.turns) >= self.budget.max_turns:
            return "max_turns"
        if self.tokens_left() <= 0:
            return "max_tokens"
        if self.tool_seconds >= self.budget.max_tool_seconds:
            return "max_time"
        return None

    # ------------------------------------------------------------------ the ledger
    def record_action(self, ids: list[int], logprobs: list[float] | None,
                      text_in: str | None) -> tuple[Turn, str, int]:
        """Append the policy's action (cut to the tokens left) as a new turn; returns the turn,
        the action's text and how many tokens were cut.  ``text_in``: a string action's own
        text (its re-encoding's drift is counted)."""
        traj, codec = self.trajectory, self.codec
        room = self.tokens_left()
        cut = max(0, len(ids) - room)
        if cut:  # the ledger never exceeds max_total_tokens
            ids = ids[:room]
            logprobs = logprobs[:room] if logprobs is not None else None
            text_in = None if text_in is None else codec.decode(ids)
        before = self._drift() if text_in is not None else 0
        span = traj.append(ids, policy=True, logprobs=logprobs)
        text = text_in if text_in is not None else codec.decode(ids)
        if text_in is not None:  # only a text action can drift; count what it added
            traj.retokenized = True
            traj.drift += max(0, self._drift() - before)
        turn = Turn(index=len(traj.turns), action_span=span)
        traj.turns.append(turn)
        self.state.notes = turn.notes
        if cut:
            turn.notes.append(f"action cut to the {room} tokens left in the budget: "
                              f"{cut} tokens dropped")
        return turn, text, cut

    def _drift(self) -> int:
        ledger = self.trajectory.prompt_ids + self.trajectory.token_ids
        return self.codec.drift(ledger)

    def result_texts(self, results: list[ToolResult], turn: Turn) -> list[str]:
        """Result texts, with the exhaustion notice shown once where the budget ran out."""
        texts, notified = [], False
        for r, record in zip(results, turn.tool_results):
            if record.get("exhausted"):
                if notified:
                    continue
                notified = True
                turn.notes.append("tool budget exhausted")
            texts.append(r.text)
        return texts

    def append_observation(self, calls: list[ToolCall], texts: list[str], body: str,
                           turn: Turn) -> list[int]:
        """Append the observation (env tokens, loss mask 0): ``body`` as the protocol rendered
        it, framed by the chat family, held to the observation and token budgets."""
        action_text = self.state.actions[-1]
        if self.chat is not None and self.chat.frames_turns():
            ids = self._bridge(calls, texts, body, turn)
        else:
            close = self.chat.close_reasoning_ids(action_text) if self.chat is not None else []
            ids = close + self.codec.encode_untrusted(body)
        budget = self.budget.max_obs_tokens
        if len(ids) > budget:
            ids, dropped = truncate_middle(ids, budget, self._marker_ids)
            turn.notes.append(f"observation truncated: {dropped} tokens dropped")
        room = self.tokens_left()
        if len(ids) > room:
            turn.notes.append(f"observation cut to the {room} tokens left in the budget")
            ids = ids[:room]
        turn.observation_span = self.trajectory.append(ids, policy=False)
        return ids

    def _bridge(self, calls: list[ToolCall], texts: list[str], body: str,
                turn: Turn) -> list[int]:
        """The family's env tokens after this action: its close if the policy did not sample
        it, the observation as ``observation_role`` message(s), the next assistant opener."""
        traj, span = self.trajectory, turn.action_span
        ledger = traj.prompt_ids + traj.token_ids
        context, completion = ledger[:len(traj.prompt_ids) + span[0]], \
            ledger[len(traj.prompt_ids) + span[0]:]
        ids, dropped = self.chat.observation_ids(context, completion,
                                                 self.chat.messages(calls, texts, body),
                                                 self.budget.max_obs_tokens)
        if dropped:
            turn.notes.append(f"observation truncated: {dropped} tokens dropped")
        return ids

    # ------------------------------------------------------------------ tool calls
    def calls_to_run(self, turn: Turn, calls: list[ToolCall], final: bool,
                     cut: int) -> list[ToolCall]:
        """The action's calls the budgets let run (the reasons for the rest go in the notes)."""
        if final or not calls:
            turn.status = Status.NO_CALL
            return []
        if cut:
            turn.notes.append("max_tokens reached: calls not executed")
            return []
        if len(self.trajectory.turns) >= self.budget.max_turns:
            turn.notes.append("max_turns reached: calls not executed")
            return []
        if self.tool_seconds >= self.budget.max_tool_seconds:
            turn.notes.append("max_tool_seconds reached: calls not executed")
            return []
        limit = self.budget.max_calls_per_turn
        if len(calls) > limit:
            turn.notes.append(f"{len(calls) - limit} call(s) beyond max_calls_per_turn ignored")
            calls = calls[:limit]
        return calls

    async def run_calls(self, calls: list[ToolCall]) -> list[tuple[ToolResult, dict[str, Any]]]:
        """Run calls in order (a stateful tool sees them in the order written)."""
        return [await self._call_one(c) for c in calls]

    async def _call_one(self, call: ToolCall) -> tuple[ToolResult, dict[str, Any]]:
        """Run one call; return its result and the host's record of it for the ledger."""
        if call.error:
            return ToolResult(f"Error: {call.error}", Status.ERROR), {"parse_error": True}
        bad = lone_surrogate(call.arguments)
        if bad is not None:  # no text: a tool raising on it would void the episode
            return (ToolResult(f"Error: the arguments hold a lone surrogate ({bad}), which is no "
                               "text; send valid Unicode", Status.ERROR), {"parse_error": True})
        tool = self.tools.get(call.name or "")
        if tool is None:
            return (ToolResult(f"Error: unknown tool {call.name!r}; available tools: "
                               f"{', '.join(sorted(self.tools))}", Status.ERROR),
                    {"unknown_tool": True})
        used = self.state.calls_used.get(tool.name, 0)
        if self.state.calls_left(tool.name) == 0:
            return ToolResult(self.exhausted_notice, Status.ERROR), {"exhausted": True}
        self.state.calls_used[tool.name] = used + 1
        start = time.perf_counter()
        result = await self._run_tool(tool, call, self.budget.max_tool_seconds - self.tool_seconds)
        elapsed = time.perf_counter() - start
        self.tool_seconds += elapsed
        if not result.latency_s:
            result.latency_s = elapsed
        return result, {"executed": True}

    async def _run_tool(self, tool: Tool, call: ToolCall, left: float) -> ToolResult:
        """The tool's result, in the episode's session, within the seconds ``left``; a tool's
        own failure is infrastructure's, never an exception out of ``step``."""
        try:
            async with asyncio.timeout(left) as scope:
                if tool.name not in self.sessions:
                    self.sessions[tool.name] = await tool.open_session(self.task)
                return await tool.call(call.arguments, self.sessions[tool.name])
        except TimeoutError as exc:
            if not scope.expired():
                return ToolResult.infra(f"the {tool.name} tool failed "
                                        f"({describe_exception(exc)})")
            return ToolResult(f"Error: {tool.name} was stopped: the episode's tools ran for "
                              f"max_tool_seconds={self.budget.max_tool_seconds:g} s",
                              Status.TIMEOUT)
        except Exception as exc:  # noqa: BLE001 - a tool's own failure is infrastructure
            return ToolResult.infra(f"the {tool.name} tool failed ({describe_exception(exc)})")
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # the caller's own cancellation (its deadline, a shutdown)
            return ToolResult.infra(f"the {tool.name} tool failed ({describe_exception(exc)})")
        except (SystemExit, GeneratorExit) as exc:  # a tool class letting its code's exit out
            return ToolResult.infra(f"the {tool.name} tool failed ({describe_exception(exc)})")

    def record_calls(self, turn: Turn, calls: Sequence[ToolCall],
                     outcomes: Sequence[tuple[ToolResult, dict[str, Any]]]) -> list[ToolResult]:
        """Write the turn's calls and the host's records of them to the ledger; the results."""
        turn.tool_calls = [c.to_dict() for c in calls]
        turn.tool_results = [_record(c, r, flags) for c, (r, flags) in zip(calls, outcomes)]
        results = [r for r, _ in outcomes]
        if results:
            turn.status = Status.of(r.status for r in results)
            self.trajectory.infra_failed |= turn.status is Status.INFRA_ERROR
        return results

    async def close_sessions(self) -> None:
        """Close the tool sessions this episode opened.  Never raises: cleanup must finish."""
        sessions, self.sessions = self.sessions, {}
        for name, session in sessions.items():
            try:
                await self.tools[name].close_session(session)
            except Exception:  # noqa: BLE001 - a failing close must not stop the others
                pass

    # ------------------------------------------------------------------ the end
    def finish(self, terminated: bool, truncated: bool, stop_reason: str) -> None:
        """Mark the episode over (the ledger's flags and stop reason, the protocol's state)."""
        traj = self.trajectory
        traj.terminated, traj.truncated, traj.stop_reason = terminated, truncated, stop_reason
        self.done = self.state.done = True

    def record_outcome(self, result: RewardResult) -> float:
        """Write the rubric's one result to the ledger and credit it; returns its value.  The
        answer recorded is the protocol's one reading (``state.answer``), the one graded."""
        traj = self.trajectory
        traj.reward_components = {**traj.reward_components, **result.components}
        traj.metadata.update(result.metadata)
        traj.infra_failed |= result.infra_failed
        answer = self.state.answer
        traj.answer = None if answer is None else str(answer)
        if traj.turns:
            traj.turns[-1].answer = traj.answer
        traj.correct, traj.answered = result.correct, result.answered
        if traj.terminated and traj.answered is False:
            traj.stop_reason = "no_answer"  # the episode ended, but with no answer to grade
        traj.credit(result.value)
        # With no policy token nothing carries the outcome: it stays on the episode total (an
        # empty response must score what the reward says, never a free 0).
        traj.reward = float(sum(traj.token_rewards)) if traj.num_policy_tokens else \
            float(sum(t.reward for t in traj.turns) + result.value)
        return result.value

    # ------------------------------------------------------------------ serving's view
    def served_prompt(self, ledger_ids: Sequence[int]) -> list[int]:
        """The prompt a server would give the policy now (the conversation re-rendered by the
        family's serving template), its drift from ``ledger_ids`` recorded on the ledger."""
        from tir_envs.chat.served import drift as served_drift
        served = self.chat.served_ids()
        ledger = list(ledger_ids)
        ledger_only, served_only = served_drift(ledger, served)
        entry = self.trajectory.metadata.setdefault(
            "served", {"turns": [], "drift_tokens": 0, "drifted_turns": 0})
        entry["turns"].append({"ledger_tokens": len(ledger), "served_tokens": len(served),
                               "ledger_only": ledger_only, "served_only": served_only})
        entry["drift_tokens"] += ledger_only + served_only
        entry["drifted_turns"] += bool(ledger_only or served_only)
        return served


def _record(call: ToolCall, result: ToolResult, flags: dict[str, Any]) -> dict[str, Any]:
    """The ledger's record of one call: the tool's metadata (which never repeats the result
    text), then the host's own facts, which a tool's metadata can never override."""
    return {**result.metadata, "tool": call.name, "status": result.status.value,
            "latency_s": result.latency_s, "chars": len(result.text),
            "executed": bool(flags.pop("executed", False)), **flags}
