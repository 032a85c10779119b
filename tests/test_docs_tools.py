"""docs/tools.md runs: its Python blocks in order in one namespace, then its audit and bench
commands through the CLI on the page's own function and tasks."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from tir_envs.cli import main

DOC = Path(__file__).resolve().parents[1] / "docs" / "tools.md"
TEXT = DOC.read_text(encoding="utf-8")


def test_the_tools_page_python_runs():
    pytest.importorskip("mcp")
    blocks = re.findall(r"```python\n(.*?)```", TEXT, re.DOTALL)
    assert len(blocks) >= 4
    namespace: dict = {"__name__": "docs_tools"}
    exec(compile("\n".join(blocks), str(DOC), "exec"), namespace)  # noqa: S102 - our own doc


def test_the_tools_page_commands_run(tmp_path, monkeypatch, capsys):
    first_python = re.search(r"```python\n(.*?)```", TEXT, re.DOTALL).group(1)
    module = first_python.split("assert capital.schema")[0]  # the function, as the page has it
    (tmp_path / "my_tools.py").write_text(module)
    (tmp_path / "tasks.jsonl").write_text(
        '{"question": "What is the capital of France?", "answer": "Paris"}\n'
        '{"question": "What is the capital of Japan?", "answer": "Tokyo"}\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    bash = re.search(r"```bash\n(.*?)```", TEXT, re.DOTALL).group(1)
    commands = [shlex.split(line) for line in bash.strip().splitlines()]
    assert [c[:2] for c in commands] == [["tir-envs", "audit"], ["tir-envs", "bench"],
                                         ["tir-envs", "bench"]]
    try:
        for command in commands:
            assert main([*command[1:], *(["--no-progress"] if command[1] == "bench" else [])]) == 0
    finally:
        sys.modules.pop("my_tools", None)
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert [x["accuracy_pct"]["avg"] for x in lines] == [100.0, 0.0]
    assert json.loads((tmp_path / "audit" / "audit.json").read_text())["env"] == "tir/ToolUse-v0"
