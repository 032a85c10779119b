"""Seeded ``hf:`` sampling: each sample's randomness is its own, so a benchmark's samples do not
depend on how many episodes were in flight, nor on an interruption and resume."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tir_envs.bench import run  # noqa: E402
from tir_envs.bench.store import RunStore  # noqa: E402
from tests.fixtures.tiny import tiny_qwen2, tiny_tokenizer  # noqa: E402

SETTINGS = dict(k=3, limit=4, temperature=1.0, seed=17, max_tokens=12, progress=False,
                report=False)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-model")
    tok = tiny_tokenizer()
    tiny_qwen2(tok, seed=1).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _samples(folder) -> dict[tuple[int, int], list[int]]:
    return {(r["item"], r["sample"]): r["trajectory"]["token_ids"]
            for r in RunStore(folder).suite_records("aime24")}


def test_hf_samples_equal_at_concurrency_1_and_8_and_after_an_interrupt(model_dir, tmp_path,
                                                                         monkeypatch):
    from tir_envs.rollout.hf import HFPolicy

    spec = f"hf:{model_dir}"
    run("aime24", spec, out=tmp_path / "c1", concurrency=1, **SETTINGS)
    batches: list[int] = []
    real = HFPolicy.generate_batch

    def recording(self, prompts, stops, samplings):
        batches.append(len(prompts))
        return real(self, prompts, stops, samplings)

    monkeypatch.setattr(HFPolicy, "generate_batch", recording)
    run("aime24", spec, out=tmp_path / "c8", concurrency=8, **SETTINGS)
    assert max(batches) > 1  # the episodes really shared generate calls

    # interrupted (Ctrl-C) after a few requests, then resumed with the same command
    calls = {"n": 0}
    generate = HFPolicy.generate

    async def interrupted(self, prompt_ids, stop, sampling):
        calls["n"] += 1
        if calls["n"] > 10:
            raise KeyboardInterrupt
        return await generate(self, prompt_ids, stop, sampling)

    monkeypatch.setattr(HFPolicy, "generate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run("aime24", spec, out=tmp_path / "cut", concurrency=8, **SETTINGS)
    saved = len(RunStore(tmp_path / "cut").records)
    assert 0 < saved < 12
    monkeypatch.setattr(HFPolicy, "generate", generate)
    run("aime24", spec, out=tmp_path / "cut", concurrency=5, **SETTINGS)

    one, eight, resumed = (_samples(tmp_path / name) for name in ("c1", "c8", "cut"))
    assert len(one) == 12
    assert eight == one and resumed == one
    # and the samples are samples: the 3 of one item differ from each other
    assert len({tuple(one[(0, s)]) for s in range(3)}) > 1
