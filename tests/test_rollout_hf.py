"""The transformers backend with a tiny random Qwen2 built in the test (no model hub)."""

from __future__ import annotations

import asyncio

import pytest

torch = pytest.importorskip("torch", reason="the transformers backend needs torch (train extra)")

from tests.fixtures.rollout_envs import LookupEnv  # noqa: E402
from tests.fixtures.tiny import tiny_qwen2, tiny_tokenizer  # noqa: E402
from tir_envs.rollout.engine import collect  # noqa: E402
from tir_envs.rollout.hf import HFPolicy  # noqa: E402
from tir_envs.rollout.policy import SamplingParams  # noqa: E402
from tir_envs.rollout.scripted import ScriptedPolicy  # noqa: E402

GREEDY = SamplingParams(max_tokens=12, temperature=0.0)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run fastest on one thread; on a shared 2-core machine torch's default
    intra-op threads make them tens of times slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


@pytest.fixture()
def model(tok):
    return tiny_qwen2(tok, seed=1)


def _gather(policy, prompts, stops, samplings):
    async def main():
        return await asyncio.gather(*(policy.generate(p, s, x)
                                      for p, s, x in zip(prompts, stops, samplings)))
    return asyncio.run(main())


def _forward_logprobs(model, prompt, ids, temperature=1.0):
    with torch.no_grad():
        logits = model(torch.tensor([list(prompt) + list(ids)])).logits[0].float()
    lp = torch.log_softmax(logits / temperature, -1)
    return [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(ids)]


def test_concurrent_requests_share_one_left_padded_generate_and_match_single_runs(tok, model):
    policy = HFPolicy(model, tok)
    prompts = [tok.encode("What is the sum"), tok.encode("Let me compute this with Python."),
               tok.encode("0 1 2")]
    batched = _gather(policy, prompts, [[]] * 3, [GREEDY] * 3)
    assert policy.batches == [3]
    for p, g in zip(prompts, batched):
        single = asyncio.run(policy.generate(p, [], GREEDY))
        assert single.token_ids == g.token_ids
        assert single.logprobs == pytest.approx(g.logprobs, abs=1e-4)
        assert len(g.token_ids) == 12 and g.finish_reason == "length"


def test_logprobs_are_the_models_own_under_temperature(tok, model):
    policy = HFPolicy(model, tok)
    prompts = [tok.encode("Think step by step."), tok.encode("<python>\nx")]
    hot = SamplingParams(max_tokens=10, temperature=0.7, seed=3)
    for p, g in zip(prompts, _gather(policy, prompts, [[]] * 2, [hot] * 2)):
        assert g.logprobs == pytest.approx(_forward_logprobs(model, p, g.token_ids, 0.7),
                                           abs=1e-4)


def test_stop_string_ends_the_action_at_the_shortest_prefix_and_is_kept(tok, model):
    policy = HFPolicy(model, tok)
    prompt = tok.encode("The answer is")
    free = asyncio.run(policy.generate(prompt, [], SamplingParams(max_tokens=24, temperature=0)))
    # A stop string the model is known to write: the text of two tokens from the middle.
    stop = tok.decode(free.token_ids[6:8])
    assert stop
    cut = asyncio.run(policy.generate(prompt, [stop, "never-written"],
                                      SamplingParams(max_tokens=24, temperature=0)))
    assert cut.finish_reason == "stop" and cut.stop_reason == stop
    assert cut.token_ids == free.token_ids[:len(cut.token_ids)]
    assert stop in tok.decode(cut.token_ids) and stop not in tok.decode(cut.token_ids[:-1])


def test_each_request_keeps_its_own_max_tokens_and_stops_in_one_batch(tok, model):
    policy = HFPolicy(model, tok)
    p = tok.encode("def f(n):")
    a, b = _gather(policy, [p, p], [[], []], [SamplingParams(max_tokens=3, temperature=0),
                                              SamplingParams(max_tokens=9, temperature=0)])
    assert policy.batches == [2]
    assert len(a.token_ids) == 3 and len(b.token_ids) == 9
    assert a.token_ids == b.token_ids[:3]


def test_generates_from_the_trainers_model_object_without_a_copy(tok, model):
    policy = HFPolicy(model, tok)
    assert policy.model is model
    p = tok.encode("What is")
    before = asyncio.run(policy.generate(p, [], GREEDY))
    with torch.no_grad():  # an "optimizer step" on the trainer's side, in place
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.5)
    after = asyncio.run(policy.generate(p, [], GREEDY))
    assert after.logprobs == pytest.approx(_forward_logprobs(model, p, after.token_ids),
                                           abs=1e-4)
    assert after.logprobs != pytest.approx(before.logprobs, abs=1e-3)


def test_seeded_sampling_is_reproducible_and_leaves_the_global_rng_alone(tok, model):
    policy = HFPolicy(model, tok)
    p = tok.encode("0 1 2 3")
    s = SamplingParams(max_tokens=10, temperature=1.5, seed=11)
    torch.manual_seed(0)
    expected_next = torch.rand(1)
    torch.manual_seed(0)
    one = asyncio.run(policy.generate(p, [], s))
    assert torch.rand(1) == expected_next
    assert asyncio.run(policy.generate(p, [], s)).token_ids == one.token_ids


def test_collect_with_the_hf_policy_yields_a_trainer_ready_ledger(tok, model):
    """Through a real TIREnv: every policy token's stored logprob is what the model gives it
    in a teacher-forced pass over the whole ledger, so PPO ratios start at exactly 1."""
    policy = HFPolicy(model, tok)
    env = lambda: LookupEnv(tokenizer=tok, max_turns=3, max_total_tokens=160)  # noqa: E731
    sampling = SamplingParams(max_tokens=16, temperature=1.0, seed=5)
    out = collect(env, policy, ["What is the sum of the numbers from 1 to 10?"],
                  samples_per_task=3, sampling=sampling, progress=False)
    assert len(out) == 3 and not any(t.infra_failed for t in out)
    assert max(policy.batches) == 3  # the group was generated together
    for t in out:
        assert t.has_logprobs and t.num_policy_tokens > 0
        with torch.no_grad():
            logits = model(torch.tensor([t.input_ids])).logits[0].float()
        lp = torch.log_softmax(logits, -1)
        p = len(t.prompt_ids)
        for i, (tid, m, stored) in enumerate(zip(t.token_ids, t.loss_mask, t.logprobs)):
            if m:
                assert stored == pytest.approx(lp[p + i - 1, tid].item(), abs=1e-3)


def memorize(model, trajectory, steps: int = 300, lr: float = 1e-2) -> None:
    """Teach ``model`` to write the policy spans of ``trajectory`` (teacher forcing, loss on
    the loss mask only) until greedy decoding reproduces every one of them, so it then drives
    a real multi-turn episode."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    ids = torch.tensor([trajectory.input_ids])
    mask = torch.tensor([0] * len(trajectory.prompt_ids) + trajectory.loss_mask)[1:].bool()
    model.train()
    for _ in range(steps):
        logits = model(ids).logits[0, :-1]
        if bool((logits.argmax(-1) == ids[0, 1:])[mask].all()):
            break
        loss = torch.nn.functional.cross_entropy(logits[mask], ids[0, 1:][mask])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


def teach_and_replay(envs, script, task, tok, model, max_tokens: int):
    """Play ``script`` once through ``envs`` (the reference), teach it to ``model``, then let
    the model play the task twice greedily; the envs are closed afterwards."""
    try:
        reference = collect(envs, ScriptedPolicy(script, tok), [task], progress=False)[0]
        memorize(model, reference)
        out = collect(envs, HFPolicy(model, tok), [task], samples_per_task=2, progress=False,
                      sampling=SamplingParams(max_tokens=max_tokens, temperature=0.0))
    finally:
        for env in envs:
            env.close()
    return reference, out


def test_a_trained_model_calls_the_tool_and_its_ledger_matches_the_script(tok, model):
    """Multi-turn through a real env: the model (trained in the test to use the tool) stops at
    the stop string, the env runs the call and appends the observation, the model answers.
    The ledger equals the scripted one token for token, and every policy token's logprob is
    the model's own in a teacher-forced pass (observation tokens in between included)."""
    env = lambda: LookupEnv(tokenizer=tok, max_total_tokens=200)  # noqa: E731
    task = {"id": "t", "question": "What is the sum?", "answer": "42"}
    script = ["<search>paris</search>", "<answer>42</answer><|im_end|>"]
    reference = collect(env, ScriptedPolicy(script, tok), [task], progress=False)[0]
    memorize(model, reference)
    policy = HFPolicy(model, tok)
    out = collect(env, policy, [task], samples_per_task=2, progress=False,
                  sampling=SamplingParams(max_tokens=24, temperature=0.0))
    for t in out:
        assert t.token_ids == reference.token_ids and t.loss_mask == reference.loss_mask
        assert t.reward == 1.0 and t.num_tool_calls == 1
        assert t.metadata["finish_reasons"] == ["stop", "stop"]
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([t.input_ids])).logits[0].float(), -1)
        p = len(t.prompt_ids)
        policy_lp = [(t.logprobs[i], lp[p + i - 1, t.token_ids[i]].item())
                     for i, m in enumerate(t.loss_mask) if m]
        assert [a for a, _ in policy_lp] == pytest.approx([b for _, b in policy_lp], abs=1e-3)


def test_trained_model_through_the_real_math_env_and_sandbox(tok, model):
    """tir/MathCode-v0 (ToRL recipe) with the local Python sandbox: the model writes a code
    block, generation stops at ```output, the sandbox runs the code, the model reads the
    output and answers in \\boxed{}; the grader scores it."""
    from tir_envs.envs.mathcode import MathCodeEnv

    task = {"id": "sum", "question": "What is 1 + 2 + ... + 10?", "answer": "55"}
    script = ["Let me compute.\n```python\nprint(sum(range(1, 11)))\n```\n```output",
              "The answer is \\boxed{55}.<|im_end|>"]
    envs = [MathCodeEnv(tokenizer=tok, tasks=[task], max_total_tokens=400) for _ in range(2)]
    reference, out = teach_and_replay(envs, script, task, tok, model, max_tokens=48)
    assert reference.reward == 1.0 and "55" in tok.decode(
        reference.token_ids[slice(*reference.turns[0].observation_span)])
    for t in out:
        assert t.token_ids == reference.token_ids and t.loss_mask == reference.loss_mask
        assert t.reward == 1.0 and t.num_tool_calls == 1 and t.turns[0].status == "ok"
        assert t.has_logprobs and not t.infra_failed




def _prefers_padding(model, vocab: int, boost: float = 100.0):
    """Make the model put almost all its mass on the padded rows (ids >= ``vocab``), as an
    untrained or drifting model with padded embeddings can."""
    def hook(module, args, output):
        output[..., vocab:] += boost
        return output
    model.lm_head.register_forward_hook(hook)
    return model


def _masked_forward_logprobs(model, prompt, ids, vocab, temperature=1.0):
    with torch.no_grad():
        logits = model(torch.tensor([list(prompt) + list(ids)])).logits[0].float()
    lp = torch.log_softmax(logits[:, :vocab] / temperature, -1)
    return [lp[len(prompt) - 1 + i, t].item() for i, t in enumerate(ids)]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_padded_embedding_rows_are_never_generated(tok, temperature):
    """Qwen2.5 has 151,936 embedding rows for 151,665 tokens: the padded ids must never come
    out, and the logprobs are those of the distribution over the tokenizer's ids."""
    vocab = len(tok)
    model = _prefers_padding(tiny_qwen2(tok, seed=1, padded_rows=64), vocab)
    policy = HFPolicy(model, tok)
    assert model.config.vocab_size == vocab + 64 and policy.vocab_size == vocab
    prompt = tok.encode("Let me compute")
    sampling = SamplingParams(max_tokens=12, temperature=temperature, seed=5)
    gen = asyncio.run(policy.generate(prompt, [], sampling))
    assert len(gen.token_ids) == 12 and max(gen.token_ids) < vocab
    assert gen.logprobs == pytest.approx(
        _masked_forward_logprobs(model, prompt, gen.token_ids, vocab, temperature or 1.0),
        abs=1e-4)


def test_a_tokenizer_larger_than_the_model_is_refused(tok):
    small = tiny_qwen2(tok, seed=1, padded_rows=-20)
    with pytest.raises(ValueError, match=f"has {len(tok) - 20} embedding rows but the "
                                         f"tokenizer has {len(tok)} tokens"):
        HFPolicy(small, tok)


def test_per_request_generators_make_a_sample_independent_of_its_batch(tok, model):
    policy = HFPolicy(model, tok, per_request_rng=True)
    prompts = [tok.encode("What is the sum"), tok.encode("0 1 2"), tok.encode("<python>\nx"),
               tok.encode("The answer is")]
    hot = [SamplingParams(max_tokens=10, temperature=1.2, top_p=0.9, seed=40 + i)
           for i in range(4)]
    batched = _gather(policy, prompts, [[]] * 4, hot)
    assert policy.batches == [4]
    alone = [asyncio.run(policy.generate(p, [], s)) for p, s in zip(prompts, hot)]
    assert [g.token_ids for g in alone] == [g.token_ids for g in batched]
    # the logprobs are still the model's own under the temperature
    for p, g in zip(prompts, batched):
        assert g.logprobs == pytest.approx(_forward_logprobs(model, p, g.token_ids, 1.2),
                                           abs=1e-4)
    # other seeds, other samples
    again = _gather(policy, prompts, [[]] * 4, [SamplingParams(max_tokens=10, temperature=1.2,
                                                               top_p=0.9, seed=90 + i)
                                                for i in range(4)])
    assert [g.token_ids for g in again] != [g.token_ids for g in batched]
