"""Shared pieces of the gateway tests: a family-aware scripted policy that records what it was
given, the tool the agents call, and the ledger invariant every test checks.

``ToolLoopPolicy`` writes what a model of the family writes: ``calls`` tool calls in the
family's own syntax (``renderer.render_calls``, reasoning included where the family reasons),
one per turn, then a final answer.  It counts the tool's results in the context it is given
(``tool-said-``), so it needs no state: any client, any order.
"""

from __future__ import annotations

from typing import Any, Sequence

from tir_envs.rollout.policy import Generation, SamplingParams

ANSWER = "The answer is \\boxed{42}."


def tool_add(a: int, b: int) -> str:
    """What every agent's ``add`` tool returns (the policy counts these markers)."""
    return f"tool-said-{int(a) + int(b)}"


class ToolLoopPolicy:
    """See the module docstring; ``seen[i]`` is the prompt of the i-th call."""

    def __init__(self, tokenizer: Any, renderer: Any, calls: int = 2, logprob: float = -0.25,
                 tool: str = "add", arguments: Any = None):
        from tir_envs.codec import Codec
        self.tokenizer, self.renderer, self.calls = tokenizer, renderer, calls
        #: text to ids as the model samples them (control tokens as their ids: Mistral too)
        self.encode = Codec(tokenizer).encode
        #: the tool it calls and its arguments at the k-th call (default: add(a=k, b=1))
        self.tool = tool
        self.arguments = arguments or (lambda k: {"a": k, "b": 1})
        self.logprob = logprob
        self.seen: list[list[int]] = []
        stops = [tokenizer.decode([i], skip_special_tokens=False)
                 for i in renderer.stop_token_ids()]
        # GLM-4.5 ends a call turn with <|observation|> and an answer with <|user|> (the next
        # role's header, which the template writes); the others with their end-of-turn
        self.eot = "<|user|>" if "<|user|>" in stops else stops[0]
        self.call_end = "<|observation|>" if "<|observation|>" in stops else stops[0]

    def action(self, context: str) -> str:
        done = context.count("tool-said-")
        if done < self.calls:
            text = self.renderer.render_calls([(self.tool, self.arguments(done))])
            # Mistral writes the call's id: a fresh one per call, as the model does
            text = text.replace('"id": "call00000"', f'"id": "call{done:05d}"')
            return text if text.endswith(self.call_end) else text + self.call_end
        if hasattr(self.renderer, "render_final"):  # gpt-oss: analysis, then the final channel
            return self.renderer.render_final(ANSWER)
        reason = self.renderer.reasoning
        opened = reason is not None and context.rstrip().endswith(reason.open)
        think = "" if reason is None or self.renderer.thinking == "off" else (
            "Done.\n" + reason.close + "\n\n" if opened else
            f"{reason.open}\nDone.\n{reason.close}\n\n")
        return think + ANSWER + self.eot

    async def generate(self, prompt_ids: Sequence[int], stop: Sequence[str],
                       sampling: SamplingParams) -> Generation:
        self.seen.append(list(prompt_ids))
        text = self.action(self.tokenizer.decode(list(prompt_ids), skip_special_tokens=False))
        ids = self.encode(text)[:sampling.max_tokens]
        return Generation(ids, [self.logprob] * len(ids), "stop")


def check_ledger(result: Any, seen: Sequence[Sequence[int]]) -> None:
    """Every prompt the backend received is a prefix of one of the episode's segments, ending
    where a sampled span starts; every sampled token is mask 1 with its logprob."""
    for ids in seen:
        hits = []
        for traj in result.trajectories:
            full = traj.prompt_ids + traj.token_ids
            n = len(ids)
            if len(traj.prompt_ids) <= n < len(full) and full[:n] == list(ids) and \
                    traj.loss_mask[n - len(traj.prompt_ids)] == 1 and \
                    (n == len(traj.prompt_ids) or traj.loss_mask[n - len(traj.prompt_ids) - 1]
                     == 0):
                hits.append(traj)
        assert hits, "a prompt the backend received is no segment's ledger prefix"
    for traj in result.trajectories:
        assert len(traj.token_ids) == len(traj.loss_mask) == len(traj.logprobs)
        for m, lp in zip(traj.loss_mask, traj.logprobs):
            assert (lp == -0.25) if m else (lp == 0.0)


class Answers:
    """A backend answering one short sentence (ChatML, the bundled tokenizer)."""

    def __init__(self):
        from tir_envs.tokenizer import qwen25_tokenizer
        self.tokenizer = qwen25_tokenizer()
        self.ids = self.tokenizer.encode("Forty-two.<|im_end|>", add_special_tokens=False)

    async def generate(self, prompt_ids, stop, sampling):
        return Generation(list(self.ids), [-0.5] * len(self.ids), "stop")
