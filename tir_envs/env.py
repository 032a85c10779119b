"""``TIREnv``: the Gymnasium environment every ``tir/*`` env is built from.

An episode is a token ledger (``tir_envs.trajectory.Trajectory``).  ``reset`` renders the
prompt; each ``step`` takes the ids the policy generated for one turn, appends them with loss
mask 1, decodes them only to find tool calls, runs the calls, and appends the observation
(encoded on its own) with loss mask 0.

The env is async-first: ``areset``/``astep``/``aclose`` are the implementation, and Gymnasium's
``reset``/``step``/``close`` are final shims that run them (``tir_envs.sync_bridge``), so every
caller (a Gymnasium loop, the ``EpisodeRunner``, a trainer adapter) runs the same code.
Subclasses customise through hooks (``on_reset``, ``on_close``, ...), never by overriding one
of the twins.

What differs between papers lives in a ``Protocol`` (``tir_envs.protocols``); what differs
between envs is wiring: the protocol, the tools and the reward, all constructor parts.  The
running episode is an ``Episode`` (``tir_envs.episode``: the ledger, the protocol's state, tool
sessions, the budget spent, the chat conversation, the done flag), built at each ``reset``;
the reward is one ``RewardTerms`` (``tir_envs.rewards.terms``: outcome, per-turn and format
terms).  This class is the Gymnasium face over them: it checks actions, asks the protocol
which calls an action makes and whether it ends the episode, reads the answer once (the
protocol's, when the episode ends) for both the ledger and the reward terms, and states the
``GenerationLimits`` a generator needs (``info["limits"]``, mirrored into
``info["stop_sequences"]``/``info["max_new_tokens"]``) at ``reset`` and every ``step``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from tir_envs.actions import coerce_action
from tir_envs.chat.binding import ChatBinding
from tir_envs.codec import Codec
from tir_envs.formats import ToolCall, ToolCallFormat, get_format
from tir_envs.limits import GenerationLimits
from tir_envs.episode import EXHAUSTED_NOTICE, Episode
from tir_envs.protocols.base import EpisodeState, Protocol
from tir_envs.protocols.budgets import Budgets
from tir_envs.rewards.base import Reward, RewardResult, as_reward
from tir_envs.rewards.terms import RewardTerms
from tir_envs.sync_bridge import needs_loop, run_sync
from tir_envs.task import Task, resolve_tasks
from tir_envs.tokenizer import load_tokenizer, tokenizer_ref
from tir_envs.tools.base import Tool, ToolResult
from tir_envs.trajectory import Trajectory, Turn

RESET_OPTIONS = ("task", "index")
#: the methods a subclass must not override (the hooks are the way to customise)
FINAL = ("reset", "step", "close", "areset", "astep", "aclose")
#: hooks that are gone, and what replaced them
REMOVED = {"outcome": "the episode's outcome is the reward part's: pass reward=f(task, "
                      "trajectory, answer) -> RewardResult, or a tir_envs.rewards.Reward (it gets "
                      "the protocol's one answer; see docs/write_an_env.md)",
           "aoutcome": "a reward that awaits I/O defines async ascore(task, trajectory, answer) "
                       "on its tir_envs.rewards.Reward; pass it as reward=",
           "extra_reward": "the protocol's own terms are the reward's format term "
                           "(Protocol.extra_reward(state)); weigh them with "
                           "reward_weights={'format': w} (0 leaves them out)"}


def _budget_field(name: str) -> tuple[Callable[[Any], Any], Callable[[Any, Any], None]]:
    """Getter and setter of one field of ``env.budget`` (a new, checked ``Budgets``)."""
    def get(env: Any) -> Any:
        return getattr(env.budget, name)

    def set_(env: Any, value: Any) -> None:
        env.budget = env.budget.merged(**{name: value})
    return get, set_


@dataclass
class _Action:
    """One recorded action, as the rest of its step needs it."""

    turn: Turn
    calls: list[ToolCall]  # the calls to execute (after budgets)
    final: bool            # the protocol says the action ends the episode
    cut: int               # tokens dropped to fit max_total_tokens


class TIREnv(gym.Env):
    """Base class of the token-in/token-out tool environments (see the module docstring).

    ``protocol``: a ``Protocol``; without one, the generic protocol over ``tool_format``,
    ``system_prompt`` and ``chat``.  ``reward``: a ``tir_envs.rewards.Reward`` or a function
    ``f(task, trajectory, answer) -> RewardResult``, given the protocol's answer when the
    episode ends (``None``: no outcome reward).  ``tasks``: a list (Tasks, dicts, strings), a
    JSONL path, or a dataset name the env ships (``load_tasks``).  ``use_tools=False``: the
    protocol's standalone prompt and no tool ever runs (the "w/o tools" ablation; one action
    per episode).

    Budgets (``None``: the protocol's default): ``max_turns``, ``max_tool_calls`` (per tool; once
    spent the env inserts ``exhausted_notice``), ``max_calls_per_turn``, ``max_tool_seconds``,
    ``max_obs_tokens``, ``max_total_tokens``, ``max_response_tokens`` (``False``: no cap
    beside the total), merged into one ``tir_envs.protocols.Budgets``, ``env.budget`` (its
    docstring and docs/concepts.md say what each does).  ``reward_weights``: the reward terms'
    weights by term (``outcome``, ``turn``, ``format``; default 1 each).

    ``observation_role`` (e.g. ``"tool"`` or ``"user"``) sends results back as a chat message of
    that role: the chat-template glue around it is env tokens with loss mask 0.  ``env_id``
    names an env built from parts without a subclass (recorded on every trajectory).

    Chat mode is per model family (``tir_envs.chat``, docs/chat_models.md): ``renderer`` names
    the family (``None``: detected from the tokenizer), ``thinking`` is ``"on"``/``"off"`` for
    families with both.  Reasoning blocks stay in the ledger; calls and answers inside them are
    never run or graded.

    Hooks for subclasses: ``load_tasks``, ``on_reset`` (check or prepare a task: runs on every
    reset, whoever calls it; ``aon_reset`` when that needs I/O), ``build_prompt``, ``is_final``,
    ``tools_ended`` (results that end the episode), ``answer``, ``turn_reward`` (the turn term),
    ``episode_info``, ``on_close`` (release what the env owns).  ``reset``/``step``/``close``
    and their async twins are final.
    """

    # text frames; Gymnasium's checker warns on any render mode without an fps
    metadata = {"render_modes": ["ansi"], "render_fps": 1}
    env_id = "tir/Base"
    #: dataset loaded when ``tasks`` is not given (``None``: tasks are required)
    default_tasks: str | None = None
    #: the shipped tools whose keywords the env takes (``tir_envs.envs.tooling``)
    configured_tools: tuple[str, ...] = ()
    #: how a benchmark compares this env's answers (``math``, ``qa``, ``sql``, ``choice``,
    #: ``ifeval``): a custom suite on the env needs no ``--scoring`` (``None``: it must say)
    scoring: str | None = None
    #: the env arguments an evaluation runs it with, and the run options it accepts
    eval_kwargs: Mapping[str, Any] = {}
    eval_options: tuple[str, ...] = ()

    def __init__(
        self,
        tokenizer: Any = None,
        tasks: Any = None,
        protocol: Protocol | None = None,
        tool_format: str | ToolCallFormat | None = None,
        tools: dict[str, Tool] | Sequence[Tool] | None = None,
        reward: Reward | Callable[..., RewardResult] | None = None,
        max_turns: int | None = None,
        max_tool_calls: int | Mapping[str, int] | None = None,
        max_calls_per_turn: int | None = None,
        max_tool_seconds: float | None = None,
        max_obs_tokens: int | None = None,
        max_total_tokens: int | None = None,
        max_response_tokens: int | None | bool = None,
        system_prompt: str | None = None,
        chat: bool | None = None,
        use_tools: bool = True,
        exhausted_notice: str = EXHAUSTED_NOTICE,
        observation_role: str | None = None,
        render_mode: str | None = None,
        env_id: str | None = None,
        renderer: Any = None,
        thinking: str | None = None,
        reward_weights: Mapping[str, float] | None = None,
    ):
        super().__init__()
        if env_id is not None:  # an env assembled from parts, without a subclass to name it
            self.env_id = env_id
        self.tokenizer = load_tokenizer(tokenizer)
        self.codec = Codec(self.tokenizer)
        self._tokenizer_ref = tokenizer_ref(self.tokenizer)
        self.protocol = self._protocol(protocol, tool_format, system_prompt, chat)
        self.tasks = resolve_tasks(tasks if tasks is not None else self.default_tasks,
                                   self.load_tasks)
        self.tools = self._tool_dict(tools)
        #: the one budget every episode is held to: the protocol's defaults, overridden here
        self.budget: Budgets = self.protocol.budgets.merged(
            max_turns=max_turns, max_tool_calls=max_tool_calls,
            max_calls_per_turn=max_calls_per_turn, max_tool_seconds=max_tool_seconds,
            max_obs_tokens=max_obs_tokens, max_total_tokens=max_total_tokens,
            max_response_tokens=max_response_tokens)
        if not isinstance(use_tools, bool):
            raise TypeError(f"use_tools must be True or False, got {use_tools!r}")
        self.use_tools = use_tools
        self.exhausted_notice = exhausted_notice
        role = observation_role or self.protocol.observation_role
        self.chat = chat_binding(self, renderer, thinking, role)
        #: the reward as one part: the outcome, the per-turn and the protocol's format terms
        #: (of the protocol as the chat binding adapted it: RITE's score reads its format)
        self.reward_terms = RewardTerms(as_reward(reward), turn=self.turn_reward,
                             format=self._format_terms if use_tools else None,
                             weights=reward_weights)
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.render_mode = render_mode
        vocab = self.codec.vocab_size
        self.action_space = spaces.Sequence(spaces.Discrete(vocab), stack=True)
        self.observation_space = spaces.Dict(
            {"tokens": spaces.Sequence(spaces.Discrete(vocab), stack=True)})
        self._marker_ids = self.codec.encode("\n...[truncated]...\n")
        #: the running episode (``None`` before the first reset); see ``_Action`` for a step's
        self.episode: Episode | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        removed = sorted(name for name in REMOVED if name in vars(cls))
        if removed:
            raise TypeError(f"{cls.__name__} defines {removed}, which TIREnv no longer calls: "
                            + "; ".join(REMOVED[name] for name in removed))
        overridden = sorted(name for name in FINAL if name in vars(cls))
        if overridden:
            raise TypeError(f"{cls.__name__} overrides {overridden}: reset/step/close and their "
                            "async twins are final, so every caller runs the same code; "
                            "customise through the hooks instead (on_reset(task), is_final, "
                            "turn_reward, on_close, ...; see TIREnv's docstring)")

    @staticmethod
    def _protocol(protocol: Protocol | None, tool_format, system_prompt, chat) -> Protocol:
        if protocol is None:
            return Protocol(get_format(tool_format or "tags"), system_prompt, chat)
        if not isinstance(protocol, Protocol):
            raise TypeError(f"protocol must be a tir_envs.protocols.Protocol, got "
                            f"{type(protocol).__name__}")
        if tool_format is not None or system_prompt is not None:
            raise ValueError("pass either protocol=... or tool_format/system_prompt, not both: "
                             "the protocol owns its format and prompt")
        if chat is not None and chat != protocol.chat:
            protocol = copy.copy(protocol)  # the caller's protocol object is never changed
            protocol.chat = chat
        return protocol

    # ------------------------------------------------------------------ hooks
    def load_tasks(self, source: str) -> Sequence[Any]:
        """Tasks from a string ``tasks=``: a JSONL/Parquet path here; envs add their shipped
        dataset names."""
        from pathlib import Path

        from tir_envs.data.loaders import read_records
        if not Path(source).is_file():
            raise FileNotFoundError(f"tasks={source!r} is not a file; pass a list of tasks or a "
                                    f"JSONL/Parquet path ({type(self).__name__} ships no "
                                    "named datasets)")
        return read_records(source)

    def on_reset(self, task: Task) -> None:
        """Check or prepare the task an episode is about to run, before its prompt is rendered
        (raise to refuse it).  Runs on every reset, sync or async, whoever the caller."""

    async def aon_reset(self, task: Task) -> None:
        """``on_reset`` for a reset that does I/O (a remote env's own reset): start with
        ``await needs_loop()`` before it.  Default: ``on_reset``."""
        self.on_reset(task)

    def tools_ended(self, results: list[ToolResult]) -> bool:
        """Whether this turn's tool results end the episode (a remote env said it is done).
        Default: never; the protocol decides from the action."""
        return False

    def on_close(self) -> None:
        """Release what the env owns (tools it built, pools), after the open sessions are
        closed.  Runs on ``close``/``aclose``."""

    def build_prompt(self, task: Task) -> str:
        """The prompt text: the protocol's messages through the chat template, or its raw
        text (base models)."""
        prompt = self.protocol.prompt(task, self.use_tools)
        return prompt if isinstance(prompt, str) else self.codec.decode(self._chat_prompt(prompt))

    def _chat_prompt(self, messages: list[dict[str, Any]]) -> list[int]:
        schemas = self.protocol.tool_schemas() if self.use_tools else None
        return self.chat.prompt_ids(messages, schemas)

    def _prompt_ids(self, task: Task) -> list[int]:
        """The prompt ids: the family's renderer for chat messages (never a decode/encode round
        trip), the encoded text otherwise or when a subclass overrides ``build_prompt``."""
        if type(self).build_prompt is TIREnv.build_prompt and self.chat is not None:
            prompt = self.protocol.prompt(task, self.use_tools)
            if not isinstance(prompt, str):
                return self._chat_prompt(prompt)
        return self.codec.encode(self.build_prompt(task))

    def is_final(self, action_text: str, calls: list[ToolCall]) -> bool:
        """Whether this action ends the episode (the protocol decides)."""
        return not self.use_tools or self.protocol.is_final(action_text, calls, self.state)

    def turn_reward(self, turn: Turn, results: list[ToolResult]) -> RewardResult | None:
        """An optional reward for one tool-calling turn, credited at its last policy token."""
        return None

    def episode_info(self) -> dict[str, Any]:
        """What ``reset`` reports about the episode (besides the generation info)."""
        return {"task_id": self.task.id}

    def answer(self) -> str | None:
        """The policy's final answer, as the protocol extracts it from the policy's text.  The
        env reads it once, when the episode ends (``state.answer``), and hands that same
        answer to the ledger and the reward."""
        return self.protocol.answer(self.state) if self.state else None

    def _format_terms(self, state: EpisodeState) -> tuple[dict[str, float], dict[str, Any]]:
        """The format term: the protocol's own terms (RITE's format score)."""
        return self.protocol.extra_reward(state)

    # ------------------------------------------------------------------ the episode's parts
    @property
    def reward(self) -> Reward:
        """The outcome term of the reward (what ``reward=`` gave); assigning one replaces it."""
        return self.reward_terms.outcome

    @reward.setter
    def reward(self, value: Reward | Callable[..., RewardResult] | None) -> None:
        self.reward_terms.outcome = as_reward(value)

    @property
    def task(self) -> Task | None:
        return self.episode.task if self.episode else None

    @property
    def trajectory(self) -> Trajectory | None:
        return self.episode.trajectory if self.episode else None

    @property
    def state(self) -> EpisodeState | None:
        return self.episode.state if self.episode else None

    @property
    def _done(self) -> bool:
        return self.episode is None or self.episode.done

    @property
    def _sessions(self) -> dict[str, Any]:
        return self.episode.sessions if self.episode else {}

    def tool_budget(self, name: str) -> int | None:
        """Calls of tool ``name`` allowed per episode (``None``: unlimited)."""
        return self.budget.tool_budget(name)

    # each budget keyword reads and sets its field of ``env.budget`` (set between episodes:
    # a running episode keeps the budget it started with)
    max_turns = property(*_budget_field("max_turns"))
    max_tool_calls = property(*_budget_field("max_tool_calls"))
    max_calls_per_turn = property(*_budget_field("max_calls_per_turn"))
    max_tool_seconds = property(*_budget_field("max_tool_seconds"))
    max_obs_tokens = property(*_budget_field("max_obs_tokens"))
    max_total_tokens = property(*_budget_field("max_total_tokens"))
    max_response_tokens = property(*_budget_field("max_response_tokens"))

    @property
    def actions(self) -> list[str]:
        """The texts of this episode's actions so far."""
        return self.state.actions if self.state else []

    @property
    def stop_sequences(self) -> list[str]:
        """Strings at which a generator must pause and hand the action to ``step``.  They may
        change mid-episode: read ``info["stop_sequences"]`` before every generation."""
        if not self.use_tools:
            return list(self.protocol.standalone_stops)
        if self.state is None:  # before the first reset: the format's own
            return self.protocol.format.stop_sequences
        return self.protocol.stop_sequences(self.state)

    # ------------------------------------------------------------------ reset
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Gymnasium's ``reset``: runs ``areset`` (final; customise with ``on_reset``)."""
        return run_sync(self.areset(seed=seed, options=options))

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode: close the previous one's sessions, pick the task (seeded, or
        ``options["task"]``/``options["index"]``), run ``on_reset``, render the prompt."""
        super().reset(seed=seed)
        await self.aend_episode()
        if self.episode is not None:  # until this reset succeeds, no episode is running
            self.episode.done = True
        task = self._pick_task(options or {})
        await self.aon_reset(task)
        prompt_ids = self._prompt_ids(task)
        if len(prompt_ids) >= self.max_total_tokens:
            raise ValueError(f"the prompt of task {task.id!r} is {len(prompt_ids)} tokens, "
                             f"but max_total_tokens={self.max_total_tokens} leaves no room to "
                             "answer; raise max_total_tokens")
        trajectory = Trajectory(prompt_ids=prompt_ids, task_id=task.id, env_id=self.env_id)
        if self._tokenizer_ref:  # the ids' tokenizer, pinned for whoever decodes them later
            trajectory.metadata["tokenizer"] = self._tokenizer_ref
        state = EpisodeState(
            task=task, codec=self.codec, max_turns=self.max_turns,
            tool_budgets={name: self.tool_budget(name) for name in self.tools},
            obs_token_budget=self.max_obs_tokens,
            frame=self.chat.frame if self.chat is not None else _unframed)
        self.episode = Episode(task, trajectory, state, self.budget, self.tools, self.chat,
                               self.exhausted_notice, self._marker_ids)
        obs = {"tokens": np.asarray(prompt_ids, dtype=np.int64)}
        return obs, {**self.episode_info(), **self.limits.info()}

    def _pick_task(self, options: dict[str, Any]) -> Task:
        if not isinstance(options, dict):
            raise TypeError(f"reset options must be a dict, got {type(options).__name__}")
        unknown = sorted(set(options) - set(RESET_OPTIONS))
        if unknown:
            raise ValueError(f"unknown reset option(s) {unknown}; valid: {list(RESET_OPTIONS)}")
        if "task" in options:
            return Task.coerce(options["task"])
        if not self.tasks:
            raise ValueError(f"{type(self).__name__} has no tasks: pass tasks=[...] or "
                             "reset(options={'task': ...})")
        if "index" in options:
            i = options["index"]
            if not isinstance(i, (int, np.integer)) or not 0 <= i < len(self.tasks):
                raise IndexError(f"options['index']={i!r} is not an index in "
                                 f"0..{len(self.tasks) - 1}")
            return self.tasks[int(i)]
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]

    @property
    def limits(self) -> GenerationLimits:
        """What the next generation must obey (also ``info["limits"]``, mirrored into
        ``info["stop_sequences"]``/``info["max_new_tokens"]``)."""
        ids = self.chat.stop_token_ids() if self.chat is not None else ()
        return GenerationLimits(tuple(self.stop_sequences), self._tokens_left(), ids)

    # ------------------------------------------------------------------ step
    def step(self, action: Any):
        """Gymnasium's ``step``: runs ``astep`` (final)."""
        return run_sync(self.astep(action))

    async def astep(self, action: Any):
        """One turn: record the action, run its calls (on the caller's event loop), append
        the observation; at the end of the episode, the outcome (on a worker thread)."""
        act = self._begin_turn(*self._coerce_action(action))
        episode = self.episode
        results = []
        if act.calls:
            await needs_loop()
            results = await episode.run_calls(act.calls)
        obs, reward, terminated, truncated, info = self._finish_turn(act, results)
        if episode.done:
            await self.aend_episode()
            episode.state.answer = self.answer()  # the one reading, for ledger and reward
            reward += episode.record_outcome(await self.reward_terms.ascore(episode))
            info["trajectory"] = episode.trajectory
        return obs, reward, terminated, truncated, info

    def _coerce_action(self, action: Any) -> tuple[list[int], list[float] | None, str | None]:
        """Normalise an action to ``(ids, logprobs, text)`` (``tir_envs.actions``)."""
        if self._done or self.trajectory is None:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        return coerce_action(action, self.codec)

    def _begin_turn(self, ids: list[int], logprobs: list[float] | None,
                    text_in: str | None) -> _Action:
        """Record the action and decide which of its calls run."""
        episode, state = self.episode, self.state
        turn, text, cut = episode.record_action(ids, logprobs, text_in)
        if self.chat is not None:  # nothing written inside a reasoning block is read
            text = self.chat.visible(text)
        calls = self._parse(text, state) if self.use_tools else []
        final = self.is_final(text, calls)
        state.actions.append(text)
        state.calls.append(calls)
        return _Action(turn, episode.calls_to_run(turn, calls, final, cut), final, cut)

    def _parse(self, text: str, state: EpisodeState) -> list[ToolCall]:
        """The action's calls.  A parser that raises on what the policy wrote (a family's own
        JSON reader on nesting past the recursion limit) gives one call with that error: a
        botched call is an observation, never an exception out of ``step``."""
        try:
            return self.protocol.parse(text, state)
        except (RecursionError, ValueError) as exc:
            return [ToolCall(None, {}, text, 0, len(text), f"the tool call could not be read "
                             f"({type(exc).__name__}: {str(exc)[:200]})")]

    def _finish_turn(self, act: _Action, outcomes: list[tuple[ToolResult, dict[str, Any]]]):
        """Append the observation and apply budgets; the outcome, if the episode ends, is
        the reward terms' (``astep``)."""
        episode, turn = self.episode, act.turn
        results = episode.record_calls(turn, act.calls, outcomes)
        reward = 0.0
        obs_ids: list[int] = []
        if results:
            reward += self._turn_reward(turn, results)
            texts = episode.result_texts(results, turn)
            body = self.protocol.observation(act.calls, texts, self.state.actions[-1],
                                             self.state)
            obs_ids = episode.append_observation(act.calls, texts, body, turn)
        ended_by_tools = bool(results) and self.tools_ended(results)
        terminated = (act.final and not act.cut) or ended_by_tools
        # "answered" becomes "no_answer" once the outcome says none was given
        reason = ("env_done" if ended_by_tools else "answered") if terminated else \
            "max_tokens" if act.cut else episode.limit_reached()
        truncated = not terminated and reason is not None
        if terminated or truncated:
            episode.finish(terminated, truncated, reason)
        info: dict[str, Any] = {"turn": turn, **self.limits.info()}
        obs = {"tokens": np.asarray(obs_ids, dtype=np.int64)}
        return obs, reward, terminated, truncated, info

    def _turn_reward(self, turn: Turn, results: list[ToolResult]) -> float:
        r = self.reward_terms.score_turn(turn, results)
        if r is None:
            return 0.0
        turn.reward, turn.reward_components = r.value, dict(r.components)
        self.trajectory.credit(r.value)
        return r.value

    def _tokens_left(self) -> int:
        return self.episode.tokens_left() if self.episode else 0

    # ------------------------------------------------------------------ sessions
    async def aend_episode(self) -> None:
        """Close the running episode's tool sessions (one cut short by a wrapper, a deadline
        or a cancellation); the env stays usable.  Never raises: cleanup must always finish."""
        if self.episode is None or not self.episode.sessions:
            return
        await needs_loop()
        await self.episode.close_sessions()

    def close(self) -> None:
        """Gymnasium's ``close``: runs ``aclose`` (final; customise with ``on_close``)."""
        run_sync(self.aclose())

    async def aclose(self) -> None:
        """End the running episode's sessions, then release what the env owns (``on_close``)."""
        await self.aend_episode()
        self.on_close()
        super().close()

    # ------------------------------------------------------------------ misc
    def render(self) -> str | None:
        if self.render_mode != "ansi" or self.trajectory is None:
            return None
        return "".join(f"[{kind}]\n{text}\n" for kind, text in
                       self.trajectory.segments(self.tokenizer))

    @staticmethod
    def _tool_dict(tools: dict[str, Tool] | Sequence[Tool] | None) -> dict[str, Tool]:
        if tools is None:
            return {}
        items = tools.values() if isinstance(tools, dict) else tools
        out = {}
        for tool in items:
            if not isinstance(tool, Tool):
                raise TypeError(f"tools must be Tool instances, got {type(tool).__name__}")
            out[tool.name] = tool
        return out


def chat_binding(env: TIREnv, renderer: Any, thinking: str | None,
                 role: str | None) -> ChatBinding | None:
    """The env's chat mode (``None`` for a raw-text protocol); adapts ``env.protocol`` to the
    family (its tools rendered and parsed the family's way)."""
    if not env.protocol.chat:
        if renderer is not None or thinking is not None:
            raise ValueError("renderer=/thinking= apply to chat mode; this protocol runs raw "
                             "text (pass chat=True where the env allows it)")
        return None
    binding = ChatBinding.build(env.tokenizer, env.codec, env.protocol, renderer, thinking, role)
    env.protocol = binding.adapt(env.protocol)
    return binding


def _unframed(body: str, action_text: str) -> str:
    return body


def reject_wiring(kwargs: Mapping[str, Any], env: str, hint: str) -> None:
    """Envs with their own protocol and tools refuse to have them replaced by keywords."""
    wiring = sorted(set(kwargs) & {"protocol", "tool_format", "tools", "system_prompt"})
    if wiring:
        raise ValueError(f"{env} has its own protocol and tools; {wiring} cannot be set. {hint}")
