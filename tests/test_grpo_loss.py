"""The GRPO loss against its formula, computed by hand token by token on a small batch."""

import math

import pytest
import torch

from tir_envs.trainers.grpo.loss import default_denominator, policy_loss

# two trajectories, four token slots; slot 0 of row 0 and slot 3 of row 1 are env/prompt tokens
LOGP = [[-1.0, -0.5, -2.0, -0.1], [-0.3, -1.2, -0.7, -3.0]]
OLD = [[-0.2, -0.9, -1.5, -0.1], [-0.3, -0.6, -0.8, -0.2]]
REF = [[-1.1, -0.4, -2.5, -0.3], [-0.2, -1.0, -0.9, -1.0]]
MASK = [[0, 1, 1, 1], [1, 1, 1, 0]]
ADV = [1.5, -0.8]


def by_hand(clip_low, clip_high, kl_coef, aggregation, max_len=None):
    """The docstring's equations, one token at a time in plain floats."""
    per_row, total, count = [], 0.0, 0
    for i in range(2):
        row_sum, row_n = 0.0, 0
        for t in range(4):
            if not MASK[i][t]:
                continue
            rho = math.exp(LOGP[i][t] - OLD[i][t])
            clipped = min(max(rho, 1 - clip_low), 1 + clip_high)
            loss = -min(rho * ADV[i], clipped * ADV[i])
            d = REF[i][t] - LOGP[i][t]
            loss += kl_coef * (math.exp(d) - d - 1)
            row_sum, row_n = row_sum + loss, row_n + 1
        per_row.append(row_sum / row_n)
        total, count = total + row_sum, count + row_n
    if aggregation == "token_mean":
        return total / count
    if aggregation == "seq_mean":
        return sum(per_row) / 2
    return total / (2 * max_len)


def run(clip_low=0.2, clip_high=None, kl_coef=0.0, aggregation="token_mean", **kw):
    logp = torch.tensor(LOGP, dtype=torch.float64, requires_grad=True)
    loss, stats = policy_loss(logp, torch.tensor(OLD, dtype=torch.float64),
                              torch.tensor(ADV, dtype=torch.float64), torch.tensor(MASK),
                              torch.tensor(REF, dtype=torch.float64) if kl_coef else None,
                              clip_low=clip_low, clip_high=clip_high, kl_coef=kl_coef,
                              aggregation=aggregation, **kw)
    loss.backward()
    return loss.item(), logp.grad, stats


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean", "token_sum_norm"])
@pytest.mark.parametrize("clip_high", [None, 0.28])
@pytest.mark.parametrize("kl_coef", [0.0, 0.1])
def test_loss_matches_formula(aggregation, clip_high, kl_coef):
    loss, _, _ = run(clip_high=clip_high, kl_coef=kl_coef, aggregation=aggregation, max_len=5)
    expected = by_hand(0.2, 0.2 if clip_high is None else clip_high, kl_coef, aggregation, 5)
    assert loss == pytest.approx(expected, rel=1e-12)


def test_masked_tokens_get_exactly_zero_gradient():
    # even with extreme values at masked slots (a stale logprob, a huge ref gap)
    logp = torch.tensor(LOGP, dtype=torch.float64, requires_grad=True)
    old = torch.tensor(OLD, dtype=torch.float64)
    old[0, 0], old[1, 3] = -500.0, 0.0
    ref = torch.tensor(REF, dtype=torch.float64)
    ref[0, 0] = 300.0
    loss, _ = policy_loss(logp, old, torch.tensor(ADV, dtype=torch.float64),
                          torch.tensor(MASK), ref, kl_coef=0.5)
    loss.backward()
    assert torch.isfinite(loss)
    assert logp.grad[0, 0] == 0 and logp.grad[1, 3] == 0
    on = torch.tensor(MASK).bool()
    assert (logp.grad[on] != 0).sum() >= 4  # unclipped policy tokens do get gradient


def test_gradient_matches_formula_where_unclipped():
    # d/dlogp of -rho*A / n = -rho*A/n for unclipped tokens; clipped tokens get 0
    _, grad, stats = run()
    n = sum(map(sum, MASK))
    for i in range(2):
        for t in range(4):
            if not MASK[i][t]:
                continue
            rho = math.exp(LOGP[i][t] - OLD[i][t])
            a = ADV[i]
            clipped = (a > 0 and rho > 1.2) or (a < 0 and rho < 0.8)
            want = 0.0 if clipped else -rho * a / n
            assert grad[i, t].item() == pytest.approx(want, abs=1e-12), (i, t)
    assert 0 < stats["clip_frac"] < 1


def test_clip_higher_lets_positive_advantage_ratio_grow_further():
    # row 1 token 1 has rho = e^0.6 ~ 1.82 (> 1.2 and > 1.28) and A > 0: clipped either way;
    # a token with rho = 1.25 is clipped at 0.2 but not at 0.28.
    logp = torch.tensor([[math.log(1.25)]], dtype=torch.float64, requires_grad=True)
    args = (torch.zeros(1, 1, dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64),
            torch.ones(1, 1))
    sym, _ = policy_loss(logp, *args, clip_low=0.2)
    sym.backward()
    assert logp.grad.item() == 0.0
    logp.grad = None
    high, _ = policy_loss(logp, *args, clip_low=0.2, clip_high=0.28)
    high.backward()
    assert logp.grad.item() == pytest.approx(-1.25)


def test_k3_kl_is_zero_at_reference_and_positive_elsewhere():
    logp = torch.tensor(LOGP, dtype=torch.float64)
    zero_adv = torch.zeros(2, dtype=torch.float64)
    same, stats = policy_loss(logp, logp, zero_adv, torch.tensor(MASK), logp, kl_coef=1.0)
    assert same.item() == 0.0 and stats["kl"] == 0.0
    apart, stats = policy_loss(logp, logp, zero_adv, torch.tensor(MASK),
                               torch.tensor(REF, dtype=torch.float64), kl_coef=1.0)
    assert apart.item() > 0 and stats["kl"] > 0


def test_accumulated_micro_batches_equal_one_batch():
    logp = torch.tensor(LOGP, dtype=torch.float64)
    args = (torch.tensor(OLD, dtype=torch.float64), torch.tensor(ADV, dtype=torch.float64))
    mask = torch.tensor(MASK)
    whole, _ = policy_loss(logp, *args, mask)
    denom = default_denominator(mask, "token_mean")
    parts = sum(policy_loss(logp[i:i + 1], args[0][i:i + 1], args[1][i:i + 1], mask[i:i + 1],
                            denominator=denom)[0] for i in range(2))
    assert parts.item() == pytest.approx(whole.item(), rel=1e-12)


def test_bad_arguments_are_named():
    t = torch.zeros(1, 1)
    with pytest.raises(ValueError, match="aggregation"):
        policy_loss(t, t, torch.zeros(1), t, aggregation="mean")
    with pytest.raises(ValueError, match="max_len"):
        policy_loss(t, t, torch.zeros(1), torch.ones(1, 1), aggregation="token_sum_norm")


def test_entropy_is_the_definition_at_the_sampling_temperature():
    """``token_logprobs``' entropy (computed as log Z − Σ p·z to stay cheap) equals
    −Σ p log p of the tempered distribution, position by position."""
    from types import SimpleNamespace

    from tir_envs.trainers.grpo.logprobs import token_logprobs

    logits = torch.randn(2, 5, 11, generator=torch.Generator().manual_seed(3)) * 4

    class Fixed(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None, use_cache=False):
            return SimpleNamespace(logits=logits)

    ids = torch.randint(0, 11, (2, 5), generator=torch.Generator().manual_seed(4))
    logp, ent = token_logprobs(Fixed(), ids, torch.ones_like(ids), temperature=0.7, first=1,
                               with_entropy=True)
    tempered = torch.log_softmax(logits[:, :-1] / 0.7, dim=-1)
    expected = -(tempered.exp() * tempered).sum(-1)
    assert torch.allclose(ent[:, 1:], expected, atol=1e-5)
    assert torch.allclose(logp[:, 1:], tempered.gather(-1, ids[:, 1:, None]).squeeze(-1),
                          atol=1e-6)
    assert (ent[:, 0] == 0).all() and (logp[:, 0] == 0).all()
