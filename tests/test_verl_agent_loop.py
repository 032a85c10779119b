"""The verl adapter through verl's own code: ``AgentLoopWorker.generate_sequences`` with a config
Hydra composes from verl's ``ppo_trainer.yaml``, rows loaded by verl's ``RLHFDataset``, and a
scripted client answering like vLLM; then verl's GRPO advantage and policy loss on a tiny Qwen2.

Runs in ``.venv-verl`` (``make test-verl``); skipped where verl is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

verl = pytest.importorskip("verl", reason="verl is not installed here; run `make test-verl`")
torch = pytest.importorskip("torch")

from tests.fixtures import verl_worker as vw  # noqa: E402
from tests.fixtures.parity_cases import search_index, settings as parity_settings  # noqa: E402
from tests.fixtures.parity_ledger import direct_ledgers  # noqa: E402
from tests.fixtures.scripted_server import HALLUCINATED, ScriptedServer  # noqa: E402
from tests.fixtures.verl_parity import run as run_parity  # noqa: E402
from tests.sql_helpers import CACHE  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
AGENT_FILE = ROOT / "trainers" / "verl" / "agent_loop.yaml"
TASK = {"id": "t/42", "question": "What is $6 \\times 7$?", "answer": "42"}


@pytest.fixture(scope="module")
def parity(tmp_path_factory):
    return run_parity(tmp_path_factory.mktemp("verl"), str(CACHE))


def f32(x: float) -> float:
    return float(np.float32(x))


def test_every_setting_gives_the_env_ledger(parity, qwen_tok):
    records, output, client, settings = parity
    direct = direct_ledgers(settings, qwen_tok)
    assert len(records) == len(direct) == 24
    for got, want in zip(records, direct, strict=True):
        where = f"{got['setting']}/{got['case']}"
        assert (got["setting"], got["case"]) == (want["setting"], want["case"])
        assert got["prompt_ids"] == want["prompt_ids"], where
        assert got["response_ids"] == want["response_ids"], where
        assert got["loss_mask"] == want["loss_mask"], where
        assert got["logprobs"] == [f32(x) for x in want["logprobs"]], where
        assert got["reward"] == f32(want["reward"]), where  # rm_scores are float32
        if want["reward"]:  # verl credits it on the last response token
            assert got["reward_at"] == len(want["response_ids"]) - 1, where
        # verl's actor mask: the ledger's, then zeros over the padding
        n = len(want["response_ids"])
        assert got["trainer_mask"] == want["loss_mask"] + [0] * (1024 - n), where
        assert not any(HALLUCINATED.strip() in qwen_tok.decode(r["ids"])
                       for r in client.server.requests)
    # per-turn rewards and flags travel with each row
    nt = output.non_tensor_batch
    for i, want in enumerate(direct):
        assert list(nt["turn_scores"][i]) == want["turn_rewards"]
        assert list(nt["tir_token_rewards"][i]) == want["token_rewards"]
        assert nt["tir/correct"][i] == float(want["correct"])
        assert nt["tir/infra_failed"][i] == 0.0 and nt["tir/unfinished"][i] == 0.0
        assert nt["tir/overlong"][i] == 0.0 and nt["tir/drift"][i] == 0.0
    assert output.meta_info["reward_extra_keys"][:2] == ["tir/correct", "tir/answered"]


def test_the_env_stops_and_budget_reach_the_server(parity, qwen_tok):
    _, _, client, settings = parity
    by_env = {s.name: s for s in settings}
    for p in client.params:
        assert p["include_stop_str_in_output"] is True
        assert p["logprobs"] is True  # calculate_log_probs=True in the composed config
        assert p["max_tokens"] <= 1024
    stops = {tuple(r["stop"]) for r in client.server.requests}
    assert ("```output",) in stops and () in stops  # ToRL: stop at the call, then none
    assert ("```python",) in stops and ("```",) in stops  # ZeroTIR alternates
    assert ("</search>", "</answer>") in stops
    assert by_env["sql"].env_id == "tir/SQL-v0"
    # one sticky request id per episode (verl routes a session's turns to one server)
    assert len({p["request_id"] for p in client.params}) == 24


def test_cut_observations_split_a_character_and_keep_the_env_ids(parity, qwen_tok):
    """Where the env caps an observation by tokens, the cap falls inside '𓀀' and a fresh
    encoding of the decoded text would differ: verl's rows hold the env's ids all the same.
    RITE and Search shorten their tool text on whole characters (no split to see)."""
    records, _, _, _ = parity
    split = set()
    for r in records:
        if r["case"] != "cut":
            continue
        obs = [t for t, m in zip(r["response_ids"], r["loss_mask"]) if m == 0]
        text = qwen_tok.decode(obs)
        if "\ufffd" in text:
            split.add(r["setting"])
            assert qwen_tok.encode(text, add_special_tokens=False) != obs, r["setting"]
    assert split == {"torl", "zerotir", "sql", "autotir"}


def test_env_from_environment_variables_and_the_shipped_agent_file(tmp_path, qwen_tok,
                                                                    monkeypatch):
    monkeypatch.setenv("TIR_ENV_ID", "tir/MathCode-v0")
    monkeypatch.setenv("TIR_ENV_KWARGS", json.dumps({"protocol": "torl", "tasks": [TASK]}))
    from tir_envs.trainers.verl.dataset import AGENT_NAME, rows
    from tir_envs.trainers.common.env_config import EnvConfig

    data = vw.parquet(tmp_path / "d.parquet",
                      rows(EnvConfig("tir/MathCode-v0", {"tasks": [TASK]}), qwen_tok) * 2)
    assert {r["agent_name"] for r in rows(EnvConfig("tir/MathCode-v0", {"tasks": [TASK]}))} \
        == {AGENT_NAME}
    model = vw.model_dir(tmp_path, qwen_tok)
    config = vw.compose(model, AGENT_FILE, data, 512, 256)
    server = ScriptedServer(qwen_tok, {"6 \\times 7": [
        "```python\nprint(6 * 7)\n```\n```output" + HALLUCINATED, "$\\boxed{42}$<|im_end|>"]})
    client = vw.ScriptedClient(server, qwen_tok.eos_token_id)
    from transformers import AutoTokenizer
    out = vw.generate(config, client, vw.batch_from_parquet(config, data,
                                                            AutoTokenizer.from_pretrained(model)))
    rows_ = vw.rows_of(out)
    assert [r["reward"] for r in rows_] == [1.0, 1.0]
    assert rows_[0]["response_ids"] == rows_[1]["response_ids"]
    assert out.non_tensor_batch["tir/correct"].tolist() == [1.0, 1.0]
    assert out.non_tensor_batch["tir_tool_calls"][0] == {"tir/tool_calls/python": 1.0}


def test_a_ledger_longer_than_response_length_is_masked_and_flagged(tmp_path, qwen_tok):
    setting = parity_settings(str(tmp_path / "search"), str(CACHE))[0]  # torl
    data = vw.parquet(tmp_path / "d.parquet", [
        {"data_source": setting.env_id, "agent_name": setting.name,
         "prompt": [{"role": "user", "content": c.key}],
         "extra_info": {"index": i, "tir_task": c.label}}
        for i, c in enumerate(setting.cases)])
    model = vw.model_dir(tmp_path, qwen_tok)
    config = vw.compose(model, vw.agent_loop_file(tmp_path / "l.yaml", [setting]), data,
                        512, 32)  # 'right' takes 35 tokens in three spans of < 32
    client = vw.ScriptedClient(ScriptedServer(qwen_tok, setting.scripts), qwen_tok.eos_token_id)
    from transformers import AutoTokenizer
    out = vw.generate(config, client, vw.batch_from_parquet(config, data,
                                                            AutoTokenizer.from_pretrained(model)))
    flags = out.non_tensor_batch["tir/overlong"].tolist()
    assert flags[0] == 1.0 and flags[2] == 0.0  # 'right' overflows, 'direct' fits
    assert out.batch["responses"].shape == (4, 32)
    assert int(out.batch["response_mask"][0].sum()) == 0  # no gradient from the cut ledger
    assert float(out.batch["rm_scores"][0].sum()) == 1.0   # its reward is kept
    assert int(out.batch["response_mask"][2].sum()) > 0


def test_a_label_missing_from_the_row_names_the_dataset_writer():
    from tir_envs.trainers.common.env_config import ConfigError
    from tir_envs.trainers.verl.agent_loop import row_label

    with pytest.raises(ConfigError, match="tir_envs.trainers.verl.dataset"):
        row_label({"extra_info": {"index": 0}})
    assert row_label({"extra_info": {"tir_task": "t/1"}}) == "t/1"


def test_the_example_configs_compose_with_verls_own(tmp_path):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import tir_envs
    from tir_envs.trainers.common.env_config import EnvConfig

    configs = ROOT / "trainers" / "verl" / "configs"
    names = sorted(p.stem for p in configs.glob("*.yaml") if not p.stem.endswith("_agent"))
    assert names == ["search_r1", "torl_math", "verltool_math"]
    for name in names:
        with initialize_config_dir(config_dir=str(configs), version_base=None):
            cfg = compose(name, overrides=["actor_rollout_ref.model.path=/models/x",
                                           "data.train_files=x.parquet",
                                           "data.val_files=x.parquet"])
        rollout = cfg.actor_rollout_ref.rollout
        assert rollout.agent.default_agent_loop == "tir_agent"
        assert cfg.algorithm.adv_estimator == "grpo"
        agents = OmegaConf.load(configs / Path(rollout.agent.agent_loop_config_path).name)
        (entry,) = agents
        assert entry.name == "tir_agent"
        env_config = EnvConfig(entry.env_id, OmegaConf.to_container(entry.env_kwargs))
        kwargs = {**env_config.env_kwargs, "tasks": []}
        if kwargs.get("retriever", "") is None:  # the example leaves the index to the user
            kwargs["retriever"] = search_index(str(tmp_path / "index"))
        env = tir_envs.make(env_config.env_id, **kwargs)
        # the env's whole episode budget fits the response: no episode is ever cut to verl's
        # shapes (ToRL budgets the response itself: max_response_tokens)
        inner = env.unwrapped
        assert rollout.response_length >= (inner.max_response_tokens or inner.max_total_tokens)
        env.close()


def test_verls_loss_gives_zero_gradient_on_observation_tokens(parity):
    """verl's GRPO advantage and ``compute_policy_loss_vanilla`` over the adapter's batch on a
    tiny Qwen2: the loss's gradient on every observation position is exactly zero, and not on
    policy positions."""
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.torch_functional import logprobs_from_logits

    records, output, _, _ = parity
    rows = [i for i, r in enumerate(records) if r["setting"] == "torl"]  # rewards 1, -1, 1, 1
    batch = output.batch[torch.tensor(rows)]
    width = batch["prompts"].shape[1]
    keep = int(batch["attention_mask"].sum(0).nonzero().max()) + 1  # trim shared padding
    input_ids, attn = batch["input_ids"][:, :keep], batch["attention_mask"][:, :keep]
    responses, mask = batch["responses"][:, :keep - width], batch["response_mask"][:, :keep - width]
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(
        vocab_size=151936, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True))
    logits = model(input_ids=input_ids, attention_mask=attn,
                   position_ids=batch["position_ids"][:, :keep]).logits
    logits.retain_grad()
    resp_logits = logits[:, width - 1:-1]
    log_prob = logprobs_from_logits(resp_logits, responses)
    advantages, _ = compute_grpo_outcome_advantage(
        batch["rm_scores"][:, :keep - width], mask, np.array(["torl"] * len(rows), dtype=object))
    assert advantages.abs().sum() > 0
    from tests.fixtures.verl_worker import CONFIG_DIR
    from hydra import compose, initialize_config_dir
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        actor_cfg = compose("ppo_trainer", overrides=[
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.rollout.n=4"]).actor_rollout_ref.actor
    actor = omega_conf_to_dataclass(actor_cfg)
    loss, _ = compute_policy_loss_vanilla(log_prob.detach(), log_prob, advantages, mask,
                                          loss_agg_mode="token-mean", config=actor)
    loss.backward()
    grad = logits.grad[:, width - 1:-1].abs().sum(-1)  # per response position
    real = attn[:, width:].bool()
    policy, observation = (mask.bool() & real), (~mask.bool() & real)
    assert observation.any() and policy.any()
    assert torch.all(grad[observation] == 0)
    assert torch.all(grad[policy] > 0)


def test_an_unsupported_verl_version_is_named(monkeypatch):
    from importlib import metadata

    from tir_envs.trainers.common.versions import UnsupportedVersion, require

    real = metadata.version
    monkeypatch.setattr(metadata, "version",
                        lambda d: "0.8.0" if d == "verl" else real(d))
    with pytest.raises(UnsupportedVersion, match=r"verl 0\.8\.0 is not supported .*0\.9\.1"):
        require("verl", ("0.9.1",), "verl")


def test_an_aborted_generation_is_a_kept_flagged_episode(tmp_path, qwen_tok):
    """verl's server aborts a request (weights being updated): the episode is kept with what it
    had, flagged infra_failed and unfinished, the batch still builds."""
    from verl.workers.rollout.replica import TokenOutput

    setting = parity_settings(str(tmp_path / "search"), str(CACHE))[0]  # torl
    right = setting.cases[0]

    class AbortSecondTurn(vw.ScriptedClient):
        async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
            if sum(p["request_id"] == request_id for p in self.params) == 1:
                self.params.append({"request_id": request_id, **sampling_params})
                return TokenOutput(token_ids=[], stop_reason="aborted")
            return await super().generate(request_id, prompt_ids=prompt_ids,
                                          sampling_params=sampling_params, **kwargs)

    data = vw.parquet(tmp_path / "d.parquet", [
        {"data_source": setting.env_id, "agent_name": setting.name,
         "prompt": [{"role": "user", "content": right.key}],
         "extra_info": {"index": 0, "tir_task": right.label}}])
    model = vw.model_dir(tmp_path, qwen_tok)
    config = vw.compose(model, vw.agent_loop_file(tmp_path / "l.yaml", [setting]), data, 512, 256)
    client = AbortSecondTurn(ScriptedServer(qwen_tok, setting.scripts), qwen_tok.eos_token_id)
    from transformers import AutoTokenizer
    out = vw.generate(config, client, vw.batch_from_parquet(config, data,
                                                            AutoTokenizer.from_pretrained(model)))
    nt = out.non_tensor_batch
    assert nt["tir/infra_failed"].tolist() == [1.0] and nt["tir/unfinished"].tolist() == [1.0]
    (row,) = vw.rows_of(out)
    assert sum(row["loss_mask"]) > 0  # the first action and its observation are kept
    assert "```output" in qwen_tok.decode(row["response_ids"])


def test_an_episode_ending_on_an_observation_keeps_its_return_under_gae_and_reinforce(
        tmp_path, qwen_tok, monkeypatch):
    """The token budget cuts an observation and ends the episode: the ledger ends on env
    tokens.  verl writes the reward on the last response token and GAE / REINFORCE++ skip a
    token whose mask is 0, so the adapter ends the response at the last policy token: the
    return at every policy token is the reward (-1, ToRL's), not 0."""
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.core_algos import (compute_gae_advantage_return,
                                             compute_reinforce_plus_plus_outcome_advantage)

    import tir_envs
    from tir_envs.trainers.verl.dataset import rows
    from tir_envs.trainers.common.env_config import EnvConfig

    kwargs = {"protocol": "torl", "tasks": [TASK], "max_total_tokens": 300}
    monkeypatch.setenv("TIR_ENV_ID", "tir/MathCode-v0")
    monkeypatch.setenv("TIR_ENV_KWARGS", json.dumps(kwargs))
    script = ["```python\nfor i in range(400):\n    print(i * 7)\n```\n```output"]
    env = tir_envs.make("tir/MathCode-v0", tokenizer=qwen_tok, **kwargs)  # the direct ledger
    core = env.unwrapped
    env.reset(options={"task": TASK})
    *_, info = env.step(core.codec.encode(script[0]))
    ledger = info["trajectory"]
    env.close()
    assert ledger.loss_mask[-1] == 0 and ledger.reward == -1.0  # it ends on env tokens
    end = max(i for i, m in enumerate(ledger.loss_mask) if m) + 1

    data = vw.parquet(tmp_path / "d.parquet",
                      rows(EnvConfig("tir/MathCode-v0", {"tasks": [TASK]}), qwen_tok))
    model = vw.model_dir(tmp_path, qwen_tok)
    config = vw.compose(model, AGENT_FILE, data, 512, 512)
    client = vw.ScriptedClient(ScriptedServer(qwen_tok, {"6 \\times 7": script}),
                               qwen_tok.eos_token_id)
    from transformers import AutoTokenizer
    out = vw.generate(config, client, vw.batch_from_parquet(
        config, data, AutoTokenizer.from_pretrained(model)))
    (row,) = vw.rows_of(out)
    assert row["response_ids"] == ledger.token_ids[:end]  # the ledger through its last action
    assert row["loss_mask"] == ledger.loss_mask[:end] and row["reward_at"] == end - 1
    scores, mask = out.batch["rm_scores"].float(), out.batch["response_mask"].float()
    _, gae = compute_gae_advantage_return(scores, torch.zeros_like(scores), mask,
                                          torch.tensor(1.0), torch.tensor(1.0))
    _, rpp = compute_reinforce_plus_plus_outcome_advantage(scores, mask,
                                                           AlgoConfig(gamma=1.0))
    policy = mask[0].bool()
    assert torch.all(gae[0][policy] == -1.0) and torch.all(rpp[0][policy] == -1.0)
    turn_scores = list(out.non_tensor_batch["turn_scores"][0])
    assert sum(turn_scores) == -1.0  # per-turn rewards carry the outcome too


def test_verls_default_trainer_resolves_from_the_verl_extra(tmp_path, qwen_tok):
    """verl 0.9.1's default trainer (``trainer.use_v1``) imports ``transfer_queue`` at start-up:
    the ``verl`` extra installs it, so the documented launch gets past its imports."""
    import importlib

    with_defaults = vw.compose(vw.model_dir(tmp_path, qwen_tok), AGENT_FILE,
                               tmp_path / "d.parquet")
    assert with_defaults.trainer.use_v1  # the default this test is about
    importlib.import_module("transfer_queue")
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.trainer.main_ppo import TaskRunnerV1  # noqa: F401

    trainer = get_trainer_cls(with_defaults.trainer.v1.trainer_mode)
    assert trainer.__module__.startswith("verl.trainer.ppo.v1")


def test_every_documented_launch_composes_with_verls_config_and_resolves_its_trainer():
    """Each ``main_ppo`` command of docs/verl.md (1 and 8 GPUs, 7B, two nodes, async) composes
    with verl 0.9.1's own config plus its overrides, names a training file that is not its
    validation file, and resolves the trainer its mode names."""
    from hydra import compose, initialize_config_dir

    from tests.launch_docs import commands
    from verl.trainer.ppo.v1 import get_trainer_cls

    launches = commands("verl.md", "verl.trainer.main_ppo")
    assert len(launches) >= 5
    shapes, modes = set(), set()
    for argv in launches:
        name = next(a.split("=", 1)[1] for a in argv if a.startswith("--config-name="))
        overrides = [a for a in argv if not a.startswith("--")]
        with initialize_config_dir(config_dir=str(ROOT / "trainers" / "verl" / "configs"),
                                   version_base=None):
            cfg = compose(name, overrides=overrides)
        assert cfg.data.train_files != cfg.data.val_files, argv
        assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == "tir_agent"
        get_trainer_cls(cfg.trainer.v1.trainer_mode)
        shapes.add((cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node))
        modes.add(cfg.trainer.v1.trainer_mode)
    assert {(1, 1), (1, 8), (2, 8)} <= shapes and "colocate_async" in modes
