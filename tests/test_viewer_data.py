"""The viewer's data: exact token pieces, every source format, a page that embeds no markup."""

from __future__ import annotations

import json
import re

import pytest

from tests.viewer_helpers import HOSTILE, write_episodes
from tir_envs.trajectory import read_jsonl
from tir_envs.viewer import ViewSourceError, load_episodes, page_data, render_page, write_page
from tir_envs.viewer.pieces import TokenPieces


@pytest.fixture(scope="module")
def episodes_file(tmp_path_factory):
    return write_episodes(tmp_path_factory.mktemp("view") / "traj.jsonl")


@pytest.mark.parametrize("text", [
    "plain ascii", "café 日本語 😀 x² \u200b", "<|im_start|>user\nhi<|im_end|>\n",
    "\x00\x1b[31mred\x1b[0m", "```python\nprint('é')\n```\n```output\n"])
@pytest.mark.parametrize("which", ["tiny_tok", "qwen_tok"])
def test_pieces_concatenate_to_the_decoded_text(request, which, text):
    tok = request.getfixturevalue(which)
    ids = tok.encode(text)
    pieces = TokenPieces(tok).pieces(ids)
    assert len(pieces) == len(ids)
    assert "".join(pieces) == tok.decode(ids, skip_special_tokens=False,
                                              clean_up_tokenization_spaces=False)


def test_a_character_split_over_tokens_is_never_two_replacement_marks(tiny_tok):
    ids = tiny_tok.encode("😀")
    assert len(ids) > 1  # byte-level BPE splits the emoji
    pieces = TokenPieces(tiny_tok).pieces(ids)
    assert "\ufffd" not in "".join(pieces) and "".join(pieces) == "😀"


def test_trajectory_jsonl_becomes_rows_with_verdicts(episodes_file, qwen_tok):
    episodes, settings = load_episodes(episodes_file)
    assert settings == {}
    verdicts = [e.verdict for e in episodes]
    assert verdicts.count("correct") == 2 and verdicts.count("failed") == 1
    assert verdicts.count("incorrect") == 4
    data = page_data(episodes, qwen_tok)
    ledgers = read_jsonl(episodes_file)
    for detail, traj in zip(data["episodes"], ledgers):
        assert detail["ids"] == traj.token_ids and detail["mask"] == traj.loss_mask
        assert "".join(data["strings"][i] for i in detail["text"]) == \
            qwen_tok.decode(traj.token_ids, skip_special_tokens=False)


def test_benchmark_run_folder_and_dump_folder(tmp_path, episodes_file, qwen_tok):
    from tir_envs.bench.harness import run
    from tir_envs.rollout.scripted import ScriptedPolicy

    run("gsm8k", ScriptedPolicy(["The answer is \\boxed{18}."]), out=tmp_path / "run", k=2,
        limit=2, progress=False, report=False)
    episodes, settings = load_episodes(tmp_path / "run")
    assert len(episodes) == 4 and settings["k"] == 2
    assert all(e.gold is not None for e in episodes)  # the record keeps the gold answer
    assert {e.part for e in episodes} == {"gsm8k/gsm8k"}
    dumps = tmp_path / "rollouts"
    dumps.mkdir()
    lines = episodes_file.read_text().splitlines()
    (dumps / "step_0001.jsonl").write_text("\n".join(lines[:3]) + "\n")
    (dumps / "step_0002.jsonl").write_text("\n".join(lines[3:]) + "\n")
    assert len(load_episodes(dumps)[0]) == len(lines)
    page = write_page(tmp_path / "run")
    assert page == tmp_path / "run" / "view.html" and page.stat().st_size > 1000


def test_hostile_output_cannot_close_the_data_script(episodes_file, qwen_tok):
    html = render_page(load_episodes(episodes_file)[0], qwen_tok)
    assert HOSTILE not in html and "</script><script>window.pwned" not in html
    data = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)
    page = json.loads(data.group(1))
    chunks = re.findall(r'<script type="application/json" id="ep-\d+">(.*?)</script>', html,
                        re.S)
    episodes = [ep for chunk in chunks for ep in json.loads(chunk)]
    assert len(episodes) == len(page["rows"])
    texts = ["".join(page["strings"][i] for i in ep["text"]) for ep in episodes]
    assert any(HOSTILE in t for t in texts)  # the model's text is all there, as data


@pytest.mark.parametrize("content, message", [
    ("not json\n", "not JSON"), ('{"foo": 1}\n', "neither a benchmark sample record"),
    ("[1, 2]\n", "neither a benchmark sample record")])
def test_bad_sources_name_file_line_and_fix(tmp_path, content, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    with pytest.raises(ViewSourceError, match=rf"bad.jsonl:1: {message}"):
        load_episodes(bad)
    with pytest.raises(ViewSourceError, match="does not exist"):
        load_episodes(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ViewSourceError, match="no samples.jsonl"):
        load_episodes(tmp_path / "empty")


def test_cli_writes_the_page_and_errors_in_one_line(tmp_path, episodes_file, capsys):
    from tir_envs.cli import main

    assert main(["view", str(episodes_file), "--out", str(tmp_path / "p.html")]) == 0
    assert (tmp_path / "p.html").is_file() and "wrote" in capsys.readouterr().out
    assert main(["view", str(tmp_path / "nope.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_tokenizer_that_is_not_byte_level_splits_by_prefix():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "hello": 1, "world": 2, "##s": 3}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece()
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    ids = hf.encode("hello worlds hello")
    pieces = TokenPieces(hf).pieces(ids)
    assert len(pieces) == len(ids) and "".join(pieces) == hf.decode(ids)
