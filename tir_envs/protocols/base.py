"""A protocol: one paper's way of talking to a tool-using policy.

Everything that differs between ToRL, ZeroTIR, RITE, Search-R1, SkyRL-SQL and AutoTIR lives in
a ``Protocol``: the prompt, the tool-call format, where generation pauses (which may change
mid-episode), which action ends the episode, how results are shown, and which text is the
answer.  A protocol never sees the env: it reads an explicit ``EpisodeState``.  ``TIREnv`` owns
everything else once (the ledger, budgets, sessions, chat glue, the async outcome).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from tir_envs.formats.base import ToolCall, ToolCallFormat
from tir_envs.protocols.budgets import Budgets

if TYPE_CHECKING:
    from tir_envs.codec import Codec
    from tir_envs.task import Task


def _unframed(body: str, action_text: str) -> str:
    return body


@dataclass
class EpisodeState:
    """What a protocol may read about the running episode.

    While a protocol parses the current action and decides ``is_final``, ``actions`` and
    ``calls`` hold the earlier turns only; then the env appends the current one, so
    ``observation``, ``stop_sequences`` and ``answer`` see it last.  ``notes``
    collects what the protocol wants recorded on the current turn (e.g. results it cut).
    ``frame(body, action_text)`` is the text the env will append for an observation body (the
    chat glue added), for protocols that fit results into ``obs_token_budget`` tokens.
    """

    task: "Task"
    codec: "Codec | None"
    max_turns: int
    tool_budgets: Mapping[str, int | None]
    obs_token_budget: int
    frame: Callable[[str, str], str] = _unframed
    actions: list[str] = field(default_factory=list)
    calls: list[list[ToolCall]] = field(default_factory=list)
    calls_used: dict[str, int] = field(default_factory=dict)
    done: bool = False
    notes: list[str] = field(default_factory=list)
    #: the final answer, read by the protocol once when the episode ends (``None`` before)
    answer: Any = None

    def calls_left(self, tool: str) -> int | None:
        """Executions of ``tool`` still allowed (``None``: unlimited)."""
        budget = self.tool_budgets.get(tool)
        return None if budget is None else max(0, budget - self.calls_used.get(tool, 0))

    @property
    def turns_left(self) -> int:
        """Actions still allowed after those recorded."""
        return self.max_turns - len(self.actions)


class Protocol:
    """The generic protocol: a system prompt, any tool-call format, an episode that ends at
    the first action without a call, and no answer extraction.  Papers subclass it.

    ``chat``: the prompt goes through the tokenizer's chat template (else raw text, for base
    models).  ``observation_role``: results come back as a chat message of that role (the env
    adds the template glue around the body this protocol renders).
    """

    name = "generic"
    chat: bool = True
    observation_role: str | None = None
    budgets = Budgets()
    #: where a tool-less ("w/o tools") generation must stop; the action then ends the episode
    standalone_stops: tuple[str, ...] = ()
    #: the chat renderer renders ``tool_schemas()`` and parses calls in the family's syntax (set
    #: on a copy by ``tir_envs.chat.ChatBinding``): the prompt must not restate the schemas
    native_tools: bool = False

    def __init__(self, format: ToolCallFormat, system_prompt: str | None = None,
                 chat: bool | None = None, observation_role: str | None = None):
        self.format = format
        self.system_prompt = system_prompt
        if chat is not None:
            self.chat = chat
        if observation_role is not None:
            self.observation_role = observation_role

    # -- prompt ---------------------------------------------------------------------
    def prompt(self, task: "Task", use_tools: bool = True) -> "str | list[dict[str, str]]":
        """Chat messages (``chat``) or raw text; ``use_tools=False`` asks for the standalone
        prompt of the "w/o tools" ablation."""
        if self.chat:
            system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt \
                else []
            return system + [{"role": "user", "content": task.question}]
        return (self.system_prompt + "\n\n" if self.system_prompt else "") + task.question

    def tool_schemas(self) -> list[dict] | None:
        """The tools' JSON schemas (OpenAI function format), each declared once, for a chat
        template that renders ``tools=``; ``None``: the protocol describes its tools in text."""
        return None

    # -- one action -----------------------------------------------------------------
    def stop_sequences(self, state: EpisodeState) -> list[str]:
        """Where the next generation must pause; read before every generation."""
        return self.format.stop_sequences

    def parse(self, text: str, state: EpisodeState) -> list[ToolCall]:
        """The calls of the current action (errors marked on the calls, never raised)."""
        return self.format.parse(text)

    def is_final(self, text: str, calls: list[ToolCall], state: EpisodeState) -> bool:
        """Whether the current action ends the episode.  Default: it made no call."""
        return not calls

    def observation(self, calls: list[ToolCall], texts: list[str], text: str,
                    state: EpisodeState) -> str:
        """The body the env appends after a tool-calling action (before any chat glue)."""
        return self.format.render_observation(calls, texts, text)

    # -- what an honest policy writes (scripted policies, ``tir-envs audit``) ----------
    def render_call(self, tool: str, body: str) -> str:
        """The text of an action calling ``tool`` with ``body`` as its main input, as a
        well-behaved policy writes it (up to and including the stop string it pauses at)."""
        return self.format.render_call(tool, body)

    def render_answer(self, text: str) -> str:
        """The text of a final action that answers ``text``, as a well-behaved policy writes
        it: ``answer`` reads ``text`` back from it."""
        raise NotImplementedError(f"protocol {self.name!r} does not say how an answer is "
                                  "written: define render_answer(text) (see docs/audit.md)")

    # -- the end --------------------------------------------------------------------
    def answer(self, state: EpisodeState) -> str | None:
        """The policy's final answer, from its own text only.  Default: none."""
        return None

    # -- offline: the same reading of saved action texts ---------------------------------
    def read(self, task: "Task", actions: Sequence[str]) -> Any:
        """The answer ``answer`` reads from a finished episode's action texts (each the
        policy's own text, as the env decoded it), for grading saved episodes offline with
        exactly the reading an env applies."""
        state = EpisodeState(task=task, codec=None, max_turns=len(actions), tool_budgets={},
                             obs_token_budget=0, actions=list(actions), done=True)
        return self.answer(state)

    def grade(self, reward: Any, task: "Task", actions: Sequence[str],
              trajectory: Any = None) -> Any:
        """``reward.score`` of the answer this protocol reads in ``actions`` (``read``): offline
        grading through the protocol, never a reward's own reading."""
        return reward.score(task, trajectory, self.read(task, actions))

    def extra_reward(self, state: EpisodeState) -> tuple[dict[str, float], dict[str, Any]]:
        """Reward terms the protocol itself defines (RITE's format score) and metadata to
        record with them."""
        return {}, {}
