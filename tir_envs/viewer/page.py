"""One self-contained HTML page for a set of episodes: data, style and script inline.

The page needs no network and no server: the episodes are embedded as JSON (every ``<`` escaped,
so no model output can close the script element), and the script puts text into the page only
through ``textContent``, never as markup.  Token texts are stored once in a string table and
referenced by index, which keeps pages of long runs small.

It stays quick at tens of thousands of episodes: the run table's rows are one small JSON object,
while the trajectories sit in chunks of ``CHUNK`` episodes (one ``script#ep-N`` each) that the
page parses only when an episode of the chunk is opened; the table shows one page of rows at a
time (``benchmarks/perf/viewer.py`` measures it).
"""

from __future__ import annotations

import html
import json
import math
import re
from importlib import resources
from typing import Any, Sequence

from tir_envs.viewer.pieces import TokenPieces
from tir_envs.viewer.sources import EpisodeRow


class _Strings:
    """Interns token texts: each distinct text is stored once in the page."""

    def __init__(self) -> None:
        self.table: list[str] = []
        self._index: dict[str, int] = {}

    def refs(self, texts: Sequence[str]) -> list[int]:
        out = []
        for text in texts:
            i = self._index.get(text)
            if i is None:
                i = self._index[text] = len(self.table)
                self.table.append(text)
            out.append(i)
        return out


def _num(x: Any) -> float | None:
    """JSON has no NaN/inf: a non-finite reward (OpenRLHF's dropped episodes) shows as empty."""
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


#: episodes per lazily parsed chunk of the page
CHUNK = 256


def _row(i: int, ep: EpisodeRow) -> dict[str, Any]:
    t = ep.trajectory
    step = ep.extra.get("step")
    return {"i": i, "part": ep.part, "item": ep.item, "sample": ep.sample,
            "verdict": ep.verdict, "reward": _num(t.reward), "turns": len(t.turns),
            "calls": t.num_tool_calls, "status": t.stop_reason or "",
            "tokens": len(t.prompt_ids) + len(t.token_ids), "policy": t.num_policy_tokens,
            "step": step if isinstance(step, int) else None}


def _turn(turn: Any) -> dict[str, Any]:
    calls = [{"tool": r.get("tool", ""), "status": r.get("status", ""),
              "latency_s": _num(r.get("latency_s")), "executed": bool(r.get("executed")),
              "flags": [k for k in ("parse_error", "unknown_tool", "exhausted") if r.get(k)]}
             for r in turn.tool_results]
    return {"action": list(turn.action_span), "observation": list(turn.observation_span),
            "reward": _num(turn.reward), "components": turn.reward_components,
            "status": turn.status, "calls": calls}


def _detail(ep: EpisodeRow, pieces: TokenPieces, strings: _Strings) -> dict[str, Any]:
    t = ep.trajectory
    failure = t.metadata.get("failure") or getattr(t, "failure", None)
    return {
        "prompt": strings.refs(pieces.pieces(t.prompt_ids)), "prompt_ids": t.prompt_ids,
        "text": strings.refs(pieces.pieces(t.token_ids)), "ids": t.token_ids,
        "mask": t.loss_mask, "logprobs": t.logprobs if t.has_logprobs else None,
        "turns": [_turn(turn) for turn in t.turns],
        "answer": t.answer, "gold": None if ep.gold is None else str(ep.gold),
        "correct": ep.correct, "stop_reason": t.stop_reason, "reward": _num(t.reward),
        "components": {k: _num(v) for k, v in t.reward_components.items()},
        "failure": failure if isinstance(failure, (dict, str)) or failure is None
        else {"kind": getattr(failure, "kind", ""), "message": getattr(failure, "message", "")},
        "task_id": t.task_id, "env_id": t.env_id, "source": ep.source,
        "infra_failed": t.infra_failed, "retokenized": t.retokenized, "drift": t.drift,
    }


def page_data(episodes: Sequence[EpisodeRow], tokenizer: Any,
              settings: dict[str, Any] | None = None, title: str = "") -> dict[str, Any]:
    """Everything the page's script reads (see ``viewer.js``)."""
    pieces, strings = TokenPieces(tokenizer), _Strings()
    details = [_detail(ep, pieces, strings) for ep in episodes]
    return {"title": title, "settings": settings or {},
            "rows": [_row(i, ep) for i, ep in enumerate(episodes)],
            "episodes": details, "strings": strings.table}


def _script_json(value: Any) -> str:
    """JSON that no text inside can end a ``<script>`` element with (every ``<`` escaped)."""
    data = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                      default=str)
    return data.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _asset(name: str) -> str:
    return (resources.files("tir_envs.viewer") / "assets" / name).read_text(encoding="utf-8")


def render_page(episodes: Sequence[EpisodeRow], tokenizer: Any,
                settings: dict[str, Any] | None = None, title: str = "tir-envs view") -> str:
    """The page's HTML (see the module docstring)."""
    data = page_data(episodes, tokenizer, settings, title)
    details = data.pop("episodes")
    data["chunk"] = CHUNK
    chunks = "\n".join(f'<script type="application/json" id="ep-{n}">'
                        f"{_script_json(details[start:start + CHUNK])}</script>"
                        for n, start in enumerate(range(0, len(details), CHUNK)))
    parts = {"TITLE": html.escape(title), "STYLE": _asset("viewer.css"),
             "SCRIPT": _asset("viewer.js"), "EPISODES": chunks, "DATA": _script_json(data)}
    # one pass: text put in (a model's "{{DATA}}", say) is never substituted again
    return re.sub(r"\{\{(TITLE|STYLE|SCRIPT|EPISODES|DATA)\}\}", lambda m: parts[m[1]],
                  _asset("page.html"))
