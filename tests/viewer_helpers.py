"""Real episodes for the viewer tests: the MathCode env, its sandbox and a scripted policy."""

from __future__ import annotations

from pathlib import Path

from tir_envs.rollout import collect
from tir_envs.rollout.policy import Generation, PolicyError
from tir_envs.rollout.scripted import ScriptedPolicy

#: a question the script answers right, one it answers wrong, one whose output is hostile HTML
TASKS = [
    {"id": "pow", "question": "What is 2^10?", "answer": "1024"},
    {"id": "sum", "question": "What is 3+4?", "answer": "7"},
    {"id": "html", "question": "Print some HTML.", "answer": "0"},
]
HOSTILE = "</script><script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">"


def script(context: str) -> str:
    if "```output" not in context.split("Assistant:")[-1] and "2^10" in context:
        return "Compute it: café 日本 ²\n```python\nprint(2**10)\n```\n```output"
    if "2^10" in context:
        return "So the answer is \\boxed{1024}."
    if "HTML" in context:
        return f"```python\nprint('{HOSTILE}')\n```\n```output"
    return "It is \\boxed{8}."


class FailingPolicy(ScriptedPolicy):
    """Fails on its first generation, as a server that went away."""

    async def generate(self, prompt_ids, stop, sampling) -> Generation:
        raise PolicyError("the policy server went away")


def write_episodes(out: Path) -> Path:
    """A trajectory JSONL with correct, incorrect, hostile-output and failed episodes."""
    kwargs = {"protocol": "torl"}
    good = collect("tir/MathCode-v0", ScriptedPolicy(script, logprob=-0.25), tasks=TASKS,
                   samples_per_task=2, env_kwargs=kwargs, progress=False)
    bad = collect("tir/MathCode-v0", FailingPolicy(["x"]), tasks=TASKS[:1],
                  env_kwargs=kwargs, progress=False)
    with open(out, "w", encoding="utf-8") as f:
        for traj in [*good, *bad]:
            f.write(traj.to_json() + "\n")
    return out
