"""``tir-envs demo``: math-code episodes end to end, printed so a newcomer can follow them.

A scripted policy writes real Python for three shipped MATH-500 problems, one per protocol
(ToRL, ZeroTIR, RITE).  The code runs in the local sandbox; the demo prints the prompt, each
action (policy tokens, loss mask 1), each observation (env tokens, loss mask 0), where the
rewards land, and a summary table.  Everything runs on the embedded defaults: bundled Qwen2.5
tokenizer, shipped tasks, local sandbox; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from dataclasses import dataclass
from typing import Any, Sequence

# One scripted solution per protocol: (protocol, MATH-500 task id, actions).  Each action is what
# the policy writes up to the protocol's stop string; the env fills in everything else.
DEMO_SCRIPTS: list[tuple[str, str, list[str]]] = [
    ("torl", "math500/test/precalculus/807.json", [
        "The point is (x, y) = (0, 3). Let me compute r and theta.\n"
        "```python\nimport math\nx, y = 0, 3\nr = math.hypot(x, y)\n"
        "theta = math.atan2(y, x) % (2 * math.pi)\nprint(r, theta / math.pi)\n```\n```output",
        "So r = 3 and theta = pi/2. The answer is "
        "$\\boxed{\\left( 3, \\frac{\\pi}{2} \\right)}$.",
    ]),
    ("zerotir", "math500/test/number_theory/769.json", [
        " Python handles big integers exactly, so compute the sum and reduce it.\n```python",
        "\ntotal = 129**34 + 96**38\nprint(totl % 11)\n```",
        "\nA typo. The interpreter kept `total`, so fix the name only.\n```python",
        "\nprint(total % 11)\n```",
        "\nThe remainder is 9. </think> <answer> \\boxed{9} </answer>",
    ]),
    ("rite", "math500/test/number_theory/72.json", [
        "<think>A number has exactly three divisors when it is the square of a prime. "
        "Let me list such numbers.</think>\n<tool_call>\n"
        "{\"name\": \"python\", \"arguments\": {\"code\": \"def ndiv(n):\\n    return sum(1 for d in "
        "range(1, n + 1) if n % d == 0)\\nthree = [n for n in range(1, 200) if ndiv(n) == 3]\\n"
        "print(three)\"}}\n</tool_call>",
        "<think>The list starts 4, 9, 25, 49, 121: squares of primes. The fifth is in `three`."
        "</think>\n<tool_call>\n{\"name\": \"python\", \"arguments\": {\"code\": "
        "\"print(three[4])\"}}\n</tool_call>",
        "<think>The fifth number is 121 = 11^2.</think>\n<tool_call>\n"
        "{\"name\": \"answer\", \"arguments\": {\"answer\": \"\\\\boxed{121}\"}}\n</tool_call>",
    ]),
]


class Style:
    """ANSI colours, or none (``--no-color``, or output that is not a terminal)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled else text

    def title(self, t: str) -> str:
        return self(t, "1;36")

    def policy(self, t: str) -> str:
        return self(t, "32")

    def env(self, t: str) -> str:
        return self(t, "33")

    def dim(self, t: str) -> str:
        return self(t, "2")

    def bad(self, t: str) -> str:
        return self(t, "31")


def _indent(text: str, prefix: str = "    │ ", max_lines: int | None = None) -> str:
    lines = text.split("\n")
    if max_lines is not None and len(lines) > max_lines:
        hidden = len(lines) - max_lines
        lines = lines[:max_lines] + [f"… ({hidden} more lines; --full shows them)"]
    return "\n".join(prefix + line for line in lines)


def run_lengths(mask: Sequence[int]) -> str:
    """``1×42 0×12 1×30``: the loss mask as runs."""
    runs: list[list[int]] = []
    for m in mask:
        if runs and runs[-1][0] == m:
            runs[-1][1] += 1
        else:
            runs.append([m, 1])
    return " ".join(f"{m}×{n}" for m, n in runs)


@dataclass
class EpisodeReport:
    protocol: str
    task_id: str
    turns: int
    calls: int
    policy_tokens: int
    env_tokens: int
    answer: str | None
    gold: str
    correct: bool
    reward: float
    infra_failed: bool


async def play(protocol: str, task_id: str, script: list[str], style: Style, full: bool,
               out=None) -> EpisodeReport:
    """Run one scripted episode and print it turn by turn (to ``out``, default stdout)."""
    from tir_envs.data.math import load_math_tasks
    from tir_envs.envs.mathcode import MathCodeEnv
    from tir_envs.rollout.policy import SamplingParams
    from tir_envs.rollout.scripted import ScriptedPolicy

    task = next(t for t in load_math_tasks("math500") if t.id == task_id)
    env = MathCodeEnv(protocol=protocol, tasks=[task])
    policy = ScriptedPolicy(script, tokenizer=env.tokenizer)
    p = lambda *a: print(*a, file=out or sys.stdout)  # noqa: E731
    try:
        _, info = await env.areset(options={"index": 0})
        traj = env.trajectory
        p(style.title(f"\n━━ {protocol.upper()} · {task.id} ━━"))
        p(style.dim(f"  question: {textwrap.shorten(task.question, 110)}   gold: {task.answer}"))
        p(style.env(f"  PROMPT  {len(traj.prompt_ids)} tokens, loss mask 0"))
        p(style.dim(_indent(env.codec.decode(traj.prompt_ids), max_lines=None if full else 8)))
        done = False
        while not done:
            gen = await policy.generate(traj.input_ids, env.stop_sequences,
                                        SamplingParams(max_tokens=info["max_new_tokens"]))
            stops = env.stop_sequences
            _, reward, term, trunc, info = await env.astep(
                {"tokens": gen.token_ids, "logprobs": gen.logprobs})
            done = term or trunc
            turn = info["turn"]
            a, b = turn.action_span
            p(f"  TURN {turn.index + 1}  " + style.dim(f"(generation stopped at "
                                                      f"{gen.stop_reason or 'end'!r}; "
                                                      f"stops were {stops})"))
            p(style.policy(f"    ACTION  {b - a} tokens, loss mask 1 (policy)"))
            p(style.policy(_indent(env.codec.decode(traj.token_ids[a:b]))))
            for call, res in zip(turn.tool_calls, turn.tool_results):
                p(style.dim(f"    ran {call['name']}: status {res['status']}, "
                            f"{res['latency_s']:.3f} s"))
            oa, ob = turn.observation_span
            if ob > oa:
                p(style.env(f"    OBSERVATION  {ob - oa} tokens, loss mask 0 (env)"))
                p(style.env(_indent(env.codec.decode(traj.token_ids[oa:ob]))))
            elif not done:
                p(style.dim("    (no observation: the policy paused at an opening fence)"))
            for note in turn.notes:
                p(style.dim(f"    note: {note}"))
        return _report(env, traj, task, style, p)
    finally:
        await env.aclose()
        env.close()


def _report(env, traj, task, style: Style, p) -> EpisodeReport:
    answer = traj.metadata.get("answer")
    correct = traj.reward_components.get("correct", 0.0) == 1.0
    where = [i for i, r in enumerate(traj.token_rewards) if r]
    verdict = style.policy("correct") if correct else style.bad("wrong")
    p(f"  OUTCOME  answer {answer!r} vs gold {task.answer!r}: {verdict}; stop: {traj.stop_reason}")
    comps = ", ".join(f"{k}={v:g}" for k, v in traj.reward_components.items())
    p(f"  REWARD   {traj.reward:+.2f} on token {where} (the last policy token)   [{comps}]")
    policy_tokens = traj.num_policy_tokens
    p(f"  MASK     prompt {len(traj.prompt_ids)} | {run_lengths(traj.loss_mask)}   "
      f"(policy {policy_tokens}, env {len(traj.loss_mask) - policy_tokens})")
    return EpisodeReport(env.protocol.name, task.id, len(traj.turns), traj.num_tool_calls,
                         policy_tokens, len(traj.loss_mask) - policy_tokens, answer,
                         str(task.answer), correct, traj.reward, traj.infra_failed)


def summary_table(reports: list[EpisodeReport]) -> str:
    head = ["protocol", "task", "turns", "calls", "policy tok", "env tok", "answer", "correct",
            "reward"]
    rows = [[r.protocol, r.task_id.replace("math500/test/", ""), str(r.turns), str(r.calls),
             str(r.policy_tokens), str(r.env_tokens), textwrap.shorten(str(r.answer), 28),
             "yes" if r.correct else "no", f"{r.reward:+.2f}"] for r in reports]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(head), line(["─" * w for w in widths]), *map(line, rows)])


async def run_demo(protocols: Sequence[str], color: bool, full: bool, out=None) -> int:
    style = Style(color)
    out = out or sys.stdout
    reports = []
    for protocol, task_id, script in DEMO_SCRIPTS:
        if protocol in protocols:
            reports.append(await play(protocol, task_id, script, style, full, out))
    print(style.title("\n━━ Summary ━━"), file=out)
    print(summary_table(reports), file=out)
    print(style.dim("\nLoss mask 1 = tokens the policy wrote (trained on); 0 = tokens the env "
                    "inserted. Rewards sit on the last policy token.\nNext: docs/mathcode.md, "
                    "or gymnasium.make('tir/MathCode-v0', protocol='zerotir')."), file=out)
    return 1 if any(r.infra_failed for r in reports) else 0


def main(args: argparse.Namespace) -> int:
    protocols = [r for r, _, _ in DEMO_SCRIPTS] if args.protocol == "all" else [args.protocol]
    color = not args.no_color and sys.stdout.isatty() and os.environ.get("NO_COLOR") is None
    import asyncio

    return asyncio.run(run_demo(protocols, color, args.full))


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo", help="run scripted math-code episodes end to end and print them",
        description=__doc__.split("\n\n")[1] if __doc__ else None)
    parser.add_argument("--protocol", choices=["all", "torl", "zerotir", "rite"], default="all",
                        help="which protocol's episode to run (default: all three)")
    parser.add_argument("--full", action="store_true", help="print prompts in full")
    parser.add_argument("--no-color", action="store_true", help="plain text output")
    parser.set_defaults(func=main)
