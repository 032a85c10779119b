"""Configs and the CLI: bundled recipe files, overrides, errors that name the key, and one real
step of every recipe on CPU (tiny random Qwen2 over the bundled Qwen2.5 vocabulary, the
transformers backend instead of vLLM, a handful of tasks written by the test)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tir_envs.trainers.grpo.__main__ import main
from tir_envs.trainers.grpo.config import CONFIG_DIR, GRPOConfig

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ["torl_math", "zerotir_math", "rite_math", "verltool_math", "search_r1", "skyrl_sql",
           "autotir"]
TINY = ("model.random_init={hidden_size: 32, intermediate_size: 64, num_hidden_layers: 1, "
        "num_attention_heads: 2, num_key_value_heads: 1}")


def test_every_bundled_config_loads_and_recipes_name_what_is_missing():
    assert {p.stem for p in CONFIG_DIR.glob("*.yaml")} >= {*RECIPES, "toy"}
    GRPOConfig.load(CONFIG_DIR / "toy.yaml")
    for name in RECIPES:
        with pytest.raises(ValueError, match=r"must be set.*model\.path=") as err:
            GRPOConfig.load(CONFIG_DIR / f"{name}.yaml")
        # AutoTIR trains on the env's own offline mix by default; its retriever must be set
        assert ("env.kwargs.retriever" if name == "autotir" else "data.path") in str(err.value)


def test_recipes_carry_their_papers_settings():
    def load(name, *extra):
        return GRPOConfig.load(CONFIG_DIR / f"{name}.yaml",
                               ["model.path=/m", "data.path=/d.jsonl", *extra])
    torl = load("torl_math")
    assert (torl.rollout.samples_per_task, torl.rollout.tasks_per_step) == (16, 128)
    assert torl.env.kwargs == {"protocol": "torl", "max_tool_calls": 1}
    assert torl.algorithm.kl_coef == 0
    zero = load("zerotir_math")
    assert zero.algorithm.accuracy_band == "zerotir" and zero.algorithm.mask_void
    assert zero.env.kwargs["max_tool_calls"] == 20
    # ZeroTIR's recipe (issue 33): 16 samples, one update per iteration, a KL term, one-shot
    assert zero.rollout.samples_per_task == 16 and zero.algorithm.mini_batch_size is None
    assert zero.algorithm.kl_coef > 0 and zero.env.kwargs["stateful"] is False
    search = load("search_r1", "env.kwargs.retriever=/index")
    assert search.algorithm.kl_coef == 0.001 and search.rollout.samples_per_task == 5
    assert search.env.kwargs["metric"] == "em"
    auto = GRPOConfig.load(CONFIG_DIR / "autotir.yaml", ["model.path=/m",
                                                        "env.kwargs.retriever=/index"])
    assert (auto.rollout.samples_per_task, auto.rollout.tasks_per_step) == (5, 256)
    assert auto.algorithm.kl_coef == 0.001 and auto.optim.lr == 1e-6
    assert auto.env.id == "tir/AutoTIR-v0" and auto.env.kwargs["wrong_tool"] == -1.0
    sql = load("skyrl_sql", "data.loader_kwargs.db_dir=/dbs")
    assert (sql.rollout.temperature, sql.rollout.top_p, sql.optim.grad_clip) == (0.6, 0.95, 0.5)
    rite = load("rite_math")
    assert (rite.algorithm.advantage, rite.algorithm.aggregation) == ("dr_grpo", "token_sum_norm")
    assert rite.rollout.samples_per_task == 16 and rite.algorithm.accuracy_band == "rite"
    assert rite.algorithm.pass_rate == "running" and rite.algorithm.token_weights["alpha"] == 0.8
    assert rite.env.kwargs["protocol"] == "rite"
    assert "wrong_reward" not in rite.env.kwargs  # eq. 8's ±1 is the env's own default
    assert list(rite.rollout.context_schedule.values()) == [16384, 24576]
    verl = load("verltool_math")
    assert verl.env.kwargs["tool_penalties"] == {"no_tool": 0.25, "invalid_action": 0.25}
    assert "tool_penalty" not in verl.env.kwargs and verl.env.kwargs["wrong_reward"] == -1.0
    assert verl.algorithm.aggregation == "seq_mean"  # eq. 5: per-trajectory mean
    assert (verl.rollout.samples_per_task, verl.rollout.tasks_per_step) == (16, 128)
    # Table 14 (VT-Math): max action length 2048, max response 3072
    assert (verl.rollout.max_tokens, verl.env.kwargs["max_response_tokens"]) == (2048, 3072)
    # void masking is ZeroTIR's rule alone: the other papers train on (and punish) such episodes
    assert {name for name in RECIPES if load(name, "env.kwargs.retriever=/i",
                                             "data.loader_kwargs.db_dir=/d").algorithm.mask_void
            } == {"zerotir_math"}


def test_every_recipe_serves_the_envs_whole_budget():
    """vLLM's max_model_len holds the env's budget (prompt + episode), so the engine never stops
    an episode the env has not ended (issue 33: ZeroTIR's 8192 < 9216)."""
    for name in RECIPES:
        c = GRPOConfig.load(CONFIG_DIR / f"{name}.yaml",
                            ["model.path=/m", "data.path=/d.jsonl", "env.kwargs.retriever=/i",
                             "data.loader_kwargs.db_dir=/d"])
        budget = c.env.kwargs.get("max_total_tokens") or \
            _default_budget(c.env.id, c.env.kwargs.get("protocol"))
        schedule = c.rollout.context_schedule or {0: budget}
        assert c.rollout.vllm["max_model_len"] >= max(schedule.values()), name


def _default_budget(env_id: str, protocol: str | None) -> int:
    from tir_envs.protocols import math_protocol
    from tir_envs.protocols.autotir import AutoTIRProtocol
    from tir_envs.protocols.search_r1 import SearchR1Protocol
    from tir_envs.protocols.skyrl_sql import SkyRLSQLProtocol
    if env_id == "tir/MathCode-v0":
        return math_protocol(protocol or "torl").budgets.max_total_tokens
    return {"tir/AutoTIR-v0": AutoTIRProtocol, "tir/Search-v0": SearchR1Protocol,
            "tir/SQL-v0": SkyRLSQLProtocol}[env_id].budgets.max_total_tokens


def test_overrides_are_typed_and_unknown_keys_are_named():
    c = GRPOConfig.load(CONFIG_DIR / "toy.yaml", [
        "optim.lr=1e-5", "algorithm.clip_high=0.28", "algorithm.accuracy_band=[0.1, 0.9]",
        "rollout.episode_timeout_s=30", "env.kwargs.num_values=4"])
    assert c.optim.lr == 1e-5 and isinstance(c.optim.lr, float)
    assert c.algorithm.clip_high == 0.28 and c.algorithm.accuracy_band == [0.1, 0.9]
    assert c.env.kwargs["num_values"] == 4
    with pytest.raises(ValueError, match=r"algorithm\.kl_coeff.*valid keys.*kl_coef"):
        GRPOConfig.load(CONFIG_DIR / "toy.yaml", ["algorithm.kl_coeff=0.1"])
    with pytest.raises(ValueError, match=r"optim\.lr must be a number"):
        GRPOConfig.load(CONFIG_DIR / "toy.yaml", ["optim.lr=fast"])
    with pytest.raises(ValueError, match=r"rollout\.samples_per_task must be >= 2"):
        GRPOConfig.load(CONFIG_DIR / "toy.yaml", ["rollout.samples_per_task=1"])
    with pytest.raises(ValueError, match=r"algorithm\.advantage must be grpo or dr_grpo"):
        GRPOConfig.load(CONFIG_DIR / "toy.yaml", ["algorithm.advantage=ppo"])
    with pytest.raises(ValueError, match="unknown accuracy band"):
        GRPOConfig.load(CONFIG_DIR / "toy.yaml", ["algorithm.accuracy_band=wide"])
    with pytest.raises(ValueError, match="section.key=value"):
        GRPOConfig.load(CONFIG_DIR / "toy.yaml", ["optim.lr"])


def test_bad_files_are_named(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {path: [unclosed\n")
    with pytest.raises(ValueError, match="bad.yaml.*not valid YAML"):
        GRPOConfig.load(bad)
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        GRPOConfig.load(tmp_path / "nope.yaml")
    (tmp_path / "c.toml").write_text("")
    with pytest.raises(ValueError, match=r"\.yaml, \.yml or \.json"):
        GRPOConfig.load(tmp_path / "c.toml")


def test_cli_prints_the_resolved_config_and_reports_errors(capsys):
    assert main(["--config", "toy", "--print-config", "optim.lr=3e-4"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["optim"]["lr"] == 3e-4 and printed["env"]["id"].endswith("ToyToolEnv")
    assert main(["--config", "torl_math"]) == 2
    assert "model.path" in capsys.readouterr().err
    assert main(["--config", "nonesuch"]) == 2
    assert "no bundled config of that name (bundled: " in capsys.readouterr().err


@pytest.mark.parametrize("name", RECIPES)
def test_print_config_shows_an_incomplete_recipe_and_marks_what_to_set(name, capsys):
    assert main(["--config", name, "--print-config"]) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    assert printed["model"]["path"] == "???"
    data_or_index = printed["env"]["kwargs"]["retriever"] if name == "autotir" else \
        printed["data"]["path"]
    assert data_or_index == "???"
    assert "not ready to train yet" in captured.err and "model.path" in captured.err
    with pytest.raises(ValueError, match="must be set"):  # training still refuses it
        GRPOConfig.load(name)


def test_bundled_configs_load_by_name_like_the_cli():
    assert GRPOConfig.load("toy") == GRPOConfig.load(CONFIG_DIR / "toy.yaml")
    assert GRPOConfig.load("toy.yaml", ["optim.lr=0.5"]).optim.lr == 0.5
    with pytest.raises(FileNotFoundError, match=r"'nonesuch'.*bundled: .*toy"):
        GRPOConfig.load("nonesuch")


def test_cli_trains_the_toy_task_and_writes_metrics_and_curve(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "tir_envs.trainers.grpo", "--config", "toy", "train.steps=3",
         f"train.output_dir={out}", "train.tensorboard=false", "rollout.tasks_per_step=4"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert [x["step"] for x in lines] == [1, 2, 3]
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 3
    assert (out / "curve.svg").is_file() and (out / "checkpoints" / "step_0000003").is_dir()


# ------------------------------------------------------------------ one step of each recipe
def recipe_overrides(tmp: Path, name: str) -> list[str]:
    common = ["model.path=null", TINY, "model.tokenizer=qwen2.5",
              "model.gradient_checkpointing=false", "model.device=cpu",
              "rollout.backend=transformers", "rollout.samples_per_task=2",
              "rollout.tasks_per_step=2", "rollout.max_tokens=64", "algorithm.oversample=1",
              "algorithm.mini_batch_size=null", "algorithm.max_refill_rounds=1",
              "train.steps=1", f"train.output_dir={tmp / 'out'}", "train.tensorboard=false"]
    data = tmp / "train.jsonl"
    if name in ("torl_math", "zerotir_math", "rite_math", "verltool_math"):
        rows = [{"question": "What is 2+3?", "answer": "5"},
                {"question": "What is 7*6?", "answer": "42"}]
        extra = []
    elif name == "search_r1":
        from tir_envs.tools.search.backends import build_index
        corpus = tmp / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(d) + "\n" for d in [
            {"id": "1", "title": "Paris", "text": "Paris is the capital of France."},
            {"id": "2", "title": "Rome", "text": "Rome is the capital of Italy."}]))
        index = build_index(corpus, tmp / "index", backend="bm25")
        rows = [{"question": "capital of France?", "golden_answers": ["Paris"]},
                {"question": "capital of Italy?", "golden_answers": ["Rome"]}]
        extra = [f"env.kwargs.retriever={index}"]
    elif name == "autotir":
        from tests.search_helpers import small_index
        rows = [{"question": "Which city is the capital of France?", "answer": ["Paris"],
                 "domain": "knowledge", "tool": "search"},
                {"question": "What is 7*6?", "answer": "42", "domain": "math", "tool": "python"}]
        extra = [f"env.kwargs.retriever={small_index('bm25')}"]
    else:
        from tir_envs.data.spider import spider_dir
        rows = [{"question": "How many singers are there?", "query": "SELECT count(*) FROM singer",
                 "db_id": "concert_singer"},
                {"question": "How many stadiums are there?",
                 "query": "SELECT count(*) FROM stadium", "db_id": "concert_singer"}]
        extra = [f"data.loader_kwargs.db_dir={spider_dir()}"]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return common + [f"data.path={data}"] + extra


#: per recipe: the final action given the task's answer (a right or a wrong one)
ANSWERS = {
    "torl_math": "The answer is \\boxed{{{}}}.",
    "zerotir_math": "The answer is \\boxed{{{}}}.",
    "verltool_math": "The answer is \\boxed{{{}}}.",
    "rite_math": ('<think>Done.</think>\n<tool_call>\n{{"name": "answer", "arguments": '
                  '{{"answer": "\\\\boxed{{{}}}"}}}}\n</tool_call>'),
    "search_r1": "<answer>{}</answer>",
    "autotir": "<think>I know this.</think> <answer> The final answer is \\boxed{{{}}} </answer>",
    "skyrl_sql": "<solution>{}</solution>",
}
#: question fragment -> (right answer, wrong answer), for the tasks ``recipe_overrides`` writes
KEYS = {"2+3": ("5", "0"), "7*6": ("42", "0"), "France": ("Paris", "Rome"),
        "Italy": ("Rome", "Paris"), "singers": ("SELECT count(*) FROM singer", "SELECT 0"),
        "stadiums": ("SELECT count(*) FROM stadium", "SELECT 0")}


class MixedPolicy:
    """Answers every task right in odd episodes and wrong in even ones, so each group of an even
    size holds both and its advantages are not all zero (episode i samples with seed
    ``base + i``).  Built on ``ScriptedPolicy``; it reports no logprobs, so the trainer
    computes the old ones from the model."""

    def __init__(self, recipe: str, tokenizer):
        from tir_envs.rollout.scripted import ScriptedPolicy

        self.template = ANSWERS[recipe]
        self.scripted = {right: ScriptedPolicy(lambda ctx, right=right: self.action(ctx, right),
                                               tokenizer) for right in (True, False)}

    def action(self, context: str, right: bool) -> str:
        question = context[context.rfind("?", 0, len(context)) - 80:]
        for key, answers in KEYS.items():
            if key in question:
                return self.template.format(answers[0 if right else 1])
        raise AssertionError(f"no scripted answer for {context[-200:]!r}")

    async def generate(self, prompt_ids, stop, sampling):
        return await self.scripted[sampling.seed % 2 == 1].generate(prompt_ids, stop, sampling)


@pytest.mark.parametrize("name", RECIPES)
def test_each_recipe_runs_a_real_update_on_cpu(tmp_path, name):
    """Two steps of each recipe with its own env, filters, loss and (where the recipe has one)
    reference model: rewards differ within each group, so every step trains — loss and KL finite,
    weights moved — instead of skipping the batch."""
    torch = pytest.importorskip("torch")
    from tir_envs.trainers.grpo.trainer import GRPOTrainer

    config = GRPOConfig.load(CONFIG_DIR / f"{name}.yaml",
                             recipe_overrides(tmp_path, name) + [
                                 "train.steps=2", "optim.warmup_steps=0",
                                 "optim.lr=1e-3"])  # 1e-6 moves too little for float32 k3 > 0
    trainer = GRPOTrainer(config, policy=MixedPolicy(name, load_tokenizer_for(config)))
    before = [p.detach().clone() for p in trainer.model.parameters()]
    try:
        history = trainer.train()
    finally:
        trainer.close()
    assert [h["step"] for h in history] == [1, 2]
    for h in history:
        assert "skipped" not in h and h["groups/kept"] == 2, h
        assert 0.0 < h["accuracy"] < 1.0 and h["reward/std"] > 0  # both kinds in every group
        assert h["train/loss_tokens"] > 0 and h["grad_norm"] > 0
        assert torch.isfinite(torch.tensor([h["loss"], h["kl"], h["grad_norm"]])).all()
        assert h["infra_failed"] == 0.0
    if config.algorithm.kl_coef > 0:  # the reference model is loaded, and step 2 has moved off it
        assert trainer.ref_model is not None and history[1]["kl"] > 0
    else:
        assert trainer.ref_model is None and history[1]["kl"] == 0.0
    moved = max(float((a - p.detach()).abs().max())
                for a, p in zip(before, trainer.model.parameters()))
    assert moved > 0
    assert (tmp_path / "out" / "metrics.jsonl").is_file()


def load_tokenizer_for(config: GRPOConfig):
    from tir_envs.trainers.grpo.modeling import load_tokenizer
    return load_tokenizer(config.model)
