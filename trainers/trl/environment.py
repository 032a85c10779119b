"""TRL's ``GRPOTrainer(environment_factory=...)`` over a ``tir/*`` env, beside ``rollout_func``.

``make_environment_factory(env_id, **env_kwargs)`` returns a class TRL instantiates (once per
concurrent rollout, then ``reset`` between rollouts).  Its public methods are the env's tools,
with the signatures and docstrings TRL turns into tool schemas; ``answer(answer)`` submits the
final answer; ``get_reward()`` is the env's reward of the episode::

    trainer = GRPOTrainer(model=..., args=GRPOConfig(...), train_dataset=rows,
                          environment_factory=make_environment_factory("tir/ToolUse-v0",
                                                                       tasks=..., tools=[...]))

Each dataset row reaches ``reset(**row)``: its ``label`` (a task id or a JSON task, as the
adapter's dataset writer makes them) or its ``question``/``answer`` columns pick the task.
Every tool call TRL parses is replayed into the env as the action a well-behaved policy of the
env's protocol would write (``render_call``; JSON calls with all their arguments), and
``answer`` as its final action (``render_answer``), so the env's own budgets, statuses, ledger
and reward apply.  What the model saw, though, is TRL's rendering: TRL re-renders every turn
through the chat template (``_get_tool_suffix_ids``) and parses calls with the tokenizer's
response schema, and the trainer trains on *those* ids, not on the env's ledger.
``ledger_drift`` measures the difference on a finished episode; docs/trl.md says when it
matters and when to prefer ``rollout_func``.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Callable

from tir_envs.codec import drift
from tir_envs.task import Task
from tir_envs.tools.loop_thread import LoopThread
from tir_envs.trainers.common.env_config import EnvConfig
from tir_envs.trainers.common.labels import index_tasks, task_from_label

_JSON_TO_PY = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
               "object": dict}
_THREAD: LoopThread | None = None


def _thread() -> LoopThread:
    """One loop thread for every instance: TRL calls tools from its own threads and loops, the
    env's sessions (sandbox interpreters, connections) stay on one loop."""
    global _THREAD
    if _THREAD is None or not _THREAD.alive:
        _THREAD = LoopThread("trl-environments")
    return _THREAD


class TIREnvironment:
    """Base of the generated classes: one env, one episode at a time (see the module)."""

    _config: EnvConfig
    _tokenizer: Any = None

    def __init__(self) -> None:
        self._env = self._config.make(self._tokenizer).unwrapped
        self._tasks = index_tasks(self._env.tasks)
        self._info: dict[str, Any] = {}
        self._over = True

    def reset(self, **row: Any) -> None:
        """Start the episode of ``row``'s task (TRL renders the prompt from the row itself)."""
        task = _task_of(row, self._tasks)
        _thread().run(self._env.areset(options={"task": task}))
        self._over = False

    def _act(self, text: str) -> str:
        """Step ``text`` as the policy's action; the observation text is the tool's result."""
        if self._over:
            return "Error: the episode is over; no more calls run."
        obs, reward, terminated, truncated, info = _thread().run(self._env.astep(text))
        self._info, self._over = info, terminated or truncated
        return self._unframed(self._env.codec.decode(obs["tokens"]))

    def _unframed(self, text: str) -> str:
        """The observation without the chat glue around a tool message: TRL's template adds
        its own."""
        role = self._env.protocol.observation_role
        if not role or not text:
            return text
        before, after = self._env.codec.chat_glue(role)
        eos = self._env.codec.eos_text or ""
        for opener in (before, before[len(eos):] if eos and before.startswith(eos) else before):
            if opener and text.startswith(opener):
                text = text[len(opener):]
                break
        return text[:-len(after)] if after and text.endswith(after) else text

    def get_reward(self) -> float:
        """The env's reward of the episode (an unfinished one is ended by an action without a
        call: the policy stopped without answering)."""
        if not self._over:
            self._act("")
        trajectory = self._env.trajectory
        return float(trajectory.reward) if trajectory is not None else 0.0

    @property
    def trajectory(self):
        """The env's ledger of the episode."""
        return self._env.trajectory

    def _close(self) -> None:
        """Release the env (private: TRL turns every public method into a tool)."""
        _thread().run(self._env.aclose())


def make_environment_factory(env_id: str, tokenizer: Any = None,
                             **env_kwargs: Any) -> type[TIREnvironment]:
    """A class for TRL's ``environment_factory`` serving ``env_id`` (see the module)."""
    config = EnvConfig(env_id, env_kwargs)
    probe = config.make(tokenizer).unwrapped
    try:
        methods = {name: _tool_method(name, schema, probe.protocol)
                   for name, schema in _schemas(probe).items()}
        try:
            probe.protocol.render_answer("x")
            methods["answer"] = _answer_method()
        except NotImplementedError:
            pass
    finally:
        probe.close()
    name = "TIR_" + "".join(c if c.isalnum() else "_" for c in env_id)
    return type(name, (TIREnvironment,), {"_config": config, "_tokenizer": tokenizer,
                                          **methods})


def _schemas(env: Any) -> dict[str, dict[str, Any]]:
    from tir_envs.envs.tool_use import tool_schema
    return {name: tool_schema(tool)["function"] for name, tool in env.tools.items()
            if name != "answer"}


def _tool_method(name: str, schema: dict[str, Any], protocol: Any) -> Callable[..., str]:
    """A method with ``schema``'s parameters (annotations and an ``Args:`` docstring, what
    ``transformers.utils.get_json_schema`` reads) that replays the call into the env."""
    params = schema.get("parameters", {})
    props, required = params.get("properties", {}), set(params.get("required", []))
    from tir_envs.formats.json_calls import JsonFormat
    as_json = isinstance(protocol.format, JsonFormat)
    main = next(iter(required or props), None)

    def method(self, **arguments: Any) -> str:
        if as_json:
            text = ("<tool_call>\n" + json.dumps({"name": name, "arguments": arguments},
                                                 ensure_ascii=False) + "\n</tool_call>")
        else:
            text = protocol.render_call(name, str(arguments.get(main, "")))
        return self._act(text)

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {"return": str}
    for key, prop in props.items():
        kind = _JSON_TO_PY.get(prop.get("type", "string"), str)
        default = inspect.Parameter.empty if key in required else prop.get("default")
        parameters.append(inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY,
                                            default=default, annotation=kind))
        annotations[key] = kind
    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(parameters, return_annotation=str)
    method.__annotations__ = annotations
    args = "\n".join(f"    {k}: {p.get('description', k)}" for k, p in props.items())
    method.__doc__ = f"{schema.get('description', name)}\n\nArgs:\n{args}\n" if props else \
        schema.get("description", name)
    return method


def _answer_method() -> Callable[..., str]:
    def answer(self, answer: str) -> str:
        """Give the final answer; it ends the episode.

        Args:
            answer: the final answer.
        """
        return self._act(self._env.protocol.render_answer(answer)) or "Answer recorded."
    return answer


def _task_of(row: dict[str, Any], tasks: dict[str, Task | None]) -> Task:
    if "label" in row:
        return task_from_label(row["label"], tasks)
    if "question" in row:
        return Task.coerce({k: v for k, v in row.items() if k != "prompt"})
    raise ValueError(f"a dataset row needs 'label' (a task id or JSON task) or 'question' "
                     f"(and 'answer'); got columns {sorted(row)}")


def ledger_drift(trajectory: Any, trl_prompt_ids: list[int],
                 trl_completion_ids: list[int]) -> dict[str, int]:
    """How far TRL's ids for an episode are from the env's ledger of it, prompt and completion
    apart: ``drift`` counts the differing ids between the common prefix and suffix (the longer
    side), 0 when TRL trains on exactly the env's tokens."""
    prompt, completion = list(trajectory.prompt_ids), list(trajectory.token_ids)
    return {"prompt_drift": drift(prompt, trl_prompt_ids), "prompt_tokens": len(prompt),
            "trl_prompt_tokens": len(trl_prompt_ids),
            "completion_drift": drift(completion, trl_completion_ids),
            "completion_tokens": len(completion),
            "trl_completion_tokens": len(trl_completion_ids)}
