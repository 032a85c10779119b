"""One environment, four trainers, the same tokens: the parity test.

The same scripted episodes (``tests/fixtures/parity_cases.py``: MathCode with ToRL, ZeroTIR and
RITE, Search, SQL, AutoTIR; for each a correct answer, a wrong answer after several calls, a
direct answer, an observation cut by the token cap) are driven through

* the bundled GRPO trainer's path: ``collect`` (EpisodeRunner) -> groups -> ``build_batch``;
* OpenRLHF's own ``MultiTurnAgentExecutor`` with the adapter (its ``observation_tokens``,
  ``action_ranges``, ``rollout_log_probs``, ``reward``);
* verl's ``AgentLoopWorker.generate_sequences`` (in ``.venv-verl``, dumped to JSON);
* TRL's ``GRPOTrainer._generate_and_score_completions`` (in ``.venv-trl``, dumped to JSON);

each under two vocabularies: the bundled Qwen2.5 (raw text and the bundled ChatML template) and
Qwen3 with thinking on (the real Qwen3 vocabulary, ``tir_envs.chat.qwen3``'s renderer: RITE,
Search, SQL and AutoTIR in chat mode, tool-role observations, reasoning blocks, a call written
only inside reasoning); and each trainer's record of every episode must be exactly the env's
own ledger (the episode
run by ``EpisodeRunner`` alone): prompt ids, response ids, loss mask, the trainer's own derived
mask, logprobs and reward.  verl and TRL hold logprobs (and verl rewards) as float32 tensors,
so those are compared after the same rounding.  verl and TRL need their own virtual
environments (their pins conflict with each other and with the main one): ``make test-verl``
/ ``make test-trl`` build them, and ``make test`` builds both before running this.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.fixtures.parity_cases import VOCABS, server_for, vocab_settings, vocab_tokenizer
from tests.fixtures.parity_ledger import FIELDS, direct_ledgers, load, record
from tests.sql_helpers import CACHE
from tir_envs.rollout.stops import first_stop

ROOT = Path(__file__).resolve().parents[1]
VENVS = {"verl": ROOT / ".venv-verl", "trl": ROOT / ".venv-trl"}
GROUP = 2


@pytest.fixture(scope="module")
def search_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("parity") / "search")


@pytest.fixture(scope="module")
def settings(search_root):
    return vocab_settings("qwen2.5", search_root, str(CACHE))


@pytest.fixture(scope="module")
def ledgers(settings, qwen_tok):
    return {(r["setting"], r["case"]): r for r in direct_ledgers(settings, qwen_tok)}


@pytest.fixture(scope="module")
def chat_runs(search_root):
    """The chat vocabularies' runs, each made once: ``vocab -> (settings, ledgers, tok)``."""
    made: dict = {}

    def get(vocab: str):
        if vocab not in made:
            tok = vocab_tokenizer(vocab)
            settings = vocab_settings(vocab, search_root, str(CACHE))
            made[vocab] = (settings, {(r["setting"], r["case"]): r
                                      for r in direct_ledgers(settings, tok)}, tok)
        return made[vocab]
    return get


@pytest.fixture(scope="module")
def qwen3_tok(chat_runs):
    return chat_runs("qwen3")[2]


@pytest.fixture(scope="module")
def qwen3_ledgers(chat_runs):
    return chat_runs("qwen3")[1]


def run_of(request, vocab: str):
    """``(settings, ledgers, tokenizer)`` of one vocabulary's parity run."""
    if vocab == "qwen2.5":
        return (request.getfixturevalue("settings"), request.getfixturevalue("ledgers"),
                request.getfixturevalue("qwen_tok"))
    return request.getfixturevalue("chat_runs")(vocab)


def f32(values):
    return [float(np.float32(x)) for x in values]


def assert_same(records, ledgers, trainer, rounding=None, copies=1):
    """Every episode's record equals the env's ledger; ``rounding`` for float32 fields."""
    assert len(records) == len(ledgers) * copies, trainer
    seen = set()
    for got in records:
        key = (got["setting"], got["case"])
        want, where = ledgers[key], f"{trainer}: {key}"
        seen.add(key)
        for field in FIELDS:
            expected = want[field]
            if rounding and field in rounding:
                expected = f32(expected) if isinstance(expected, list) else f32([expected])[0]
            assert got[field] == expected, f"{where}: {field}"
    assert seen == set(ledgers), trainer


def test_the_ledgers_cover_every_setting_and_case(ledgers, qwen_tok):
    assert {s for s, _ in ledgers} == {"torl", "zerotir", "rite", "search", "sql", "autotir"}
    for (setting, case), r in ledgers.items():
        statuses, calls = r["statuses"], sum(s != "no_call" for s in r["statuses"])
        if case == "direct":
            assert statuses == ["no_call"], setting
        if case == "wrong":
            assert r["correct"] is False and calls >= 2 - (setting == "torl"), setting
        if case == "right":
            assert r["correct"] is True and calls >= 1, setting
        assert not r["infra_failed"]
    # where the env caps tool output by tokens, the cut falls inside a character
    split = {s for (s, c), r in ledgers.items() if c == "cut" and "\ufffd" in qwen_tok.decode(
        [t for t, m in zip(r["response_ids"], r["loss_mask"]) if m == 0])}
    assert split == {"torl", "zerotir", "sql", "autotir"}


def test_the_qwen3_ledgers_think_and_hide_what_is_inside_reasoning(qwen3_ledgers, qwen3_tok):
    """The Qwen3 run: every env in chat mode with reasoning blocks sampled as Qwen3's special
    ids; a call or answer written only inside a closed reasoning block is never run nor graded,
    a block left open at a stop string is closed by env tokens (``</think>``, mask 0), and one
    the policy ends its turn in is content (docs/chat_models.md, the reasoning rule)."""
    think, close = (qwen3_tok.convert_tokens_to_ids(t) for t in ("<think>", "</think>"))
    names = {"qwen3-rite", "qwen3-search", "qwen3-sql", "qwen3-autotir"}
    assert {s for s, _ in qwen3_ledgers} == names
    for (setting, case), r in qwen3_ledgers.items():
        statuses, calls = r["statuses"], sum(s != "no_call" for s in r["statuses"])
        ids, mask = r["response_ids"], r["loss_mask"]
        assert not r["infra_failed"] and ids[0] == think and mask[0] == 1, (setting, case)
        if case == "direct":
            assert statuses == ["no_call"], setting
        if case == "wrong":
            assert r["correct"] is False and calls >= 2, setting
        if case == "right":
            assert r["correct"] is True and calls >= 1, setting
        if case == "think":
            assert statuses[0] != "ok", setting  # the call inside reasoning did not run
            # a turn the policy ended inside the block is content by Qwen3's one reasoning
            # rule (vLLM's parser; tests/test_chat_defects.py): graded as a server shows it
            if len(statuses) > 1:  # paused at the stop string: the env closes the block
                env = ids[mask.index(0):]
                assert env[0] == close and mask[mask.index(0)] == 0, setting
    split = {s for (s, c), r in qwen3_ledgers.items() if c == "cut" and "\ufffd" in
             qwen3_tok.decode([t for t, m in zip(r["response_ids"], r["loss_mask"]) if m == 0])}
    assert split == {"qwen3-sql"}  # the tool-role observations are cut at whole characters


def test_the_mistral_ledgers_sample_its_control_ids(chat_runs):
    """The Mistral run (real Tekken vocabulary, mistral-common): RITE's calls are the sampled
    ``[TOOL_CALLS]`` control id (mask 1) and every result comes back in ``[TOOL_RESULTS]``
    (env tokens, mask 0), in all four envs."""
    _, ledgers, tok = chat_runs("mistral")
    inner = tok.tokenizer.instruct_tokenizer
    results = inner.tokenizer.get_special_token("[TOOL_RESULTS]")
    assert {s for s, _ in ledgers} == {"mistral-rite", "mistral-search", "mistral-sql",
                                       "mistral-autotir"}
    for (setting, case), r in ledgers.items():
        ids, mask = r["response_ids"], r["loss_mask"]
        assert not r["infra_failed"], (setting, case)
        if setting == "mistral-rite":
            assert ids[0] == inner.TOOL_CALLS and mask[0] == 1
        if case in ("right", "wrong", "cut"):
            assert r["correct"] is (case != "wrong"), (setting, case)
            assert any(t == results and m == 0 for t, m in zip(ids, mask)), (setting, case)


# ------------------------------------------------------------------------------ bundled GRPO
def grpo_records(settings, tokenizer):
    """The bundled trainer's path: collect (EpisodeRunner) -> groups -> build_batch."""
    import tir_envs
    from tests.fixtures.parity_ledger import ServerPolicy
    from tir_envs.rollout import SamplingParams, collect
    from tir_envs.trainers.grpo.batch import build_batch
    from tir_envs.trainers.grpo.filtering import Group, mark_exclusions

    out = []
    for s in settings:
        policy = ServerPolicy(server_for(tokenizer, s.scripts), tokenizer.eos_token_id)
        kwargs = {**s.env_kwargs, "tokenizer": tokenizer}
        rollouts = collect(lambda: tir_envs.make(s.env_id, **kwargs), policy,
                           setting_tasks(s, tokenizer), samples_per_task=GROUP,
                           sampling=SamplingParams(max_tokens=4096), progress=False)
        groups = [mark_exclusions(Group(c.name, g), mask_void=False)
                  for c, g in zip(s.cases, rollouts.groups(), strict=True)]
        batch = build_batch(groups, tokenizer.pad_token_id)
        rewards = [t.reward for g in groups for t in g.trajectories]
        for row in range(len(batch)):
            p, n = int(batch.prompt_lengths[row]), int(batch.attention_mask[row].sum())
            ids = batch.input_ids[row].tolist()
            out.append(record(s.name, s.cases[row // GROUP].name, prompt_ids=ids[:p],
                              response_ids=ids[p:n],
                              loss_mask=batch.loss_mask[row, p:n].tolist(),
                              trainer_mask=batch.loss_mask[row].tolist(),
                              logprobs=batch.old_logprobs[row, p:n].tolist(),
                              reward=rewards[row], advantage=float(batch.advantages[row])))
    return out


def setting_tasks(setting, tokenizer):
    """The Tasks the setting's labels name, through the env's own task set (SQL's labels are
    Spider ids; the others carry whole tasks)."""
    import tir_envs
    from tir_envs.trainers.common.labels import index_tasks, task_from_label

    env = tir_envs.make(setting.env_id, **{**setting.env_kwargs, "tokenizer": tokenizer})
    try:
        index = index_tasks(env.unwrapped.tasks)
        return [task_from_label(c.label, index) for c in setting.cases]
    finally:
        env.close()


@pytest.mark.parametrize("vocab", VOCABS)
def test_bundled_grpo_batch(vocab, request):
    settings, ledgers, tok = run_of(request, vocab)
    records = grpo_records(settings, tok)
    assert_same(records, ledgers, "grpo", rounding={"logprobs"}, copies=GROUP)
    for r in records:  # the trainer's mask is the ledger's over the whole row (prompt: 0)
        n = len(r["prompt_ids"])
        assert r["trainer_mask"][:n] == [0] * n
        assert r["trainer_mask"][n:n + len(r["loss_mask"])] == r["loss_mask"]
        assert r["advantage"] == 0.0  # two copies of one episode: equal rewards


# ------------------------------------------------------------------------------ OpenRLHF
class OpenRLHFEngine:
    """vLLM's ``generate`` as OpenRLHF's executor calls it, answered by the scripted server."""

    def __init__(self, server, eos):
        self.server, self.eos = server, eos

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        await asyncio.sleep(0)
        stop = list(sampling_params.stop or [])
        out = self.server.complete(prompt_token_ids, stop, sampling_params.max_tokens, self.eos)
        text = self.server.tokenizer.decode(out.token_ids, skip_special_tokens=False)
        hit = first_stop(text, stop)  # vLLM's text ends at the stop string; its ids do not
        text = text if hit is None else text[:hit[0]]
        logprobs = None
        if sampling_params.logprobs is not None:
            logprobs = [{t: SimpleNamespace(logprob=lp)} for t, lp in zip(out.token_ids,
                                                                         out.logprobs)]
        return SimpleNamespace(outputs=[SimpleNamespace(
            token_ids=out.token_ids, text=text, finish_reason=out.finish_reason,
            stop_reason=None, logprobs=logprobs)])


def openrlhf_records(settings, tokenizer):
    pytest.importorskip("openrlhf", reason="OpenRLHF is installed by make install-dev")
    import tir_envs
    from tests.test_openrlhf_agent import Sampling
    from tir_envs.trainers.openrlhf.executor import TIRAgentExecutor

    out = []
    for s in settings:
        executor = TIRAgentExecutor(lambda tok, s=s: tir_envs.make(
            s.env_id, **{**s.env_kwargs, "tokenizer": tok}))
        engine = OpenRLHFEngine(server_for(tokenizer, s.scripts), tokenizer.eos_token_id)

        async def one(label):
            return await executor.execute(
                prompt=None, label=label, sampling_params=Sampling(max_tokens=1024, logprobs=1),
                max_length=16384, hf_tokenizer=tokenizer, llm_engine=engine)

        async def batch():
            return await asyncio.gather(*[one(c.label) for c in s.cases])

        for c, result in zip(s.cases, asyncio.run(batch()), strict=True):
            seq, ranges = result["observation_tokens"], result["action_ranges"]
            p = ranges[0][0]
            mask = [0] * len(seq)
            for a, b in ranges:
                mask[a:b] = [1] * (b - a)
            out.append(record(s.name, c.name, prompt_ids=seq[:p], response_ids=seq[p:],
                              loss_mask=mask[p:], trainer_mask=mask,
                              logprobs=result["rollout_log_probs"][p:],
                              reward=float(result["reward"]), scores=float(result["scores"])))
    return out


@pytest.mark.parametrize("vocab", VOCABS)
def test_openrlhf_executor(vocab, request):
    settings, ledgers, tok = run_of(request, vocab)
    records = openrlhf_records(settings, tok)
    assert_same(records, ledgers, "openrlhf")
    for r in records:
        assert r["scores"] == r["reward"]


# ------------------------------------------------------------------------------ verl, TRL
def venv_records(name: str, tmp_path: Path, vocab: str):
    python = VENVS[name] / "bin" / "python"
    if not python.exists():
        pytest.skip(f"{VENVS[name].name} is not built; `make test-{name}` builds it (make test "
                    "does too)")
    out = tmp_path / f"{name}.json"
    done = subprocess.run([str(python), "-m", f"tests.fixtures.{name}_parity", str(out), vocab],
                          cwd=ROOT, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-4000:]
    return load(out)


@pytest.mark.parametrize("vocab", VOCABS)
def test_verl_agent_loop_worker(vocab, request, tmp_path):
    _, ledgers, _ = run_of(request, vocab)
    records = venv_records("verl", tmp_path, vocab)
    assert_same(records, ledgers, "verl", rounding={"logprobs", "reward"})
    for r in records:  # verl's actor mask: the ledger's, then padding
        n = len(r["loss_mask"])
        assert r["trainer_mask"][:n] == r["loss_mask"] and not any(r["trainer_mask"][n:])


@pytest.mark.parametrize("vocab", VOCABS)
def test_trl_grpo_trainer(vocab, request, tmp_path):
    _, ledgers, _ = run_of(request, vocab)
    records = venv_records("trl", tmp_path, vocab)
    assert_same(records, ledgers, "trl", rounding={"logprobs"}, copies=GROUP)
    for r in records:  # TRL's loss mask: completion mask x env mask
        assert r["trainer_mask"] == r["loss_mask"]
