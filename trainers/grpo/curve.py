"""Learning curves written without plotting libraries: the points as JSON, the plot as SVG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence


def save_curve(history: Sequence[dict[str, Any]], out_dir: str | Path, key: str = "reward/mean",
               name: str = "curve", title: str | None = None, label: str = "run",
               extra: Sequence[tuple[str, Sequence[dict[str, Any]]]] = ()) -> dict[str, Path]:
    """Write ``<name>.json`` (steps and values of ``key``, per run) and ``<name>.svg``.

    ``extra``: more runs to draw on the same axes, as ``(label, history)`` pairs.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs = [(label, history), *extra]
    series = {label: [(int(r["step"]), float(r[key])) for r in h if r.get(key) is not None]
              for label, h in runs}
    json_path, svg_path = out / f"{name}.json", out / f"{name}.svg"
    json_path.write_text(json.dumps({"key": key, "series": series}, indent=1), encoding="utf-8")
    svg_path.write_text(_svg(series, title or key), encoding="utf-8")
    return {"json": json_path, "svg": svg_path}


def _svg(series: dict[str, list[tuple[int, float]]], title: str, w: int = 480, h: int = 260
         ) -> str:
    pad, colors = 40, ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    points = [p for s in series.values() for p in s]
    x_max = max((x for x, _ in points), default=1) or 1
    y_lo = min(0.0, min((y for _, y in points), default=0.0))
    y_hi = max(1.0, max((y for _, y in points), default=1.0))
    sx = lambda x: pad + (w - 2 * pad) * x / x_max  # noqa: E731
    sy = lambda y: h - pad - (h - 2 * pad) * (y - y_lo) / ((y_hi - y_lo) or 1)  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
             f'font-family="sans-serif" font-size="11">',
             f'<rect width="{w}" height="{h}" fill="white"/>',
             f'<text x="{w / 2}" y="16" text-anchor="middle">{title}</text>',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="black"/>',
             f'<text x="{w / 2}" y="{h - 8}" text-anchor="middle">step (max {x_max})</text>']
    for y in (y_lo, (y_lo + y_hi) / 2, y_hi):
        parts.append(f'<text x="{pad - 4}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    for i, (label, s) in enumerate(series.items()):
        color = colors[i % len(colors)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{path}"/>')
        parts.append(f'<text x="{w - pad}" y="{pad + 14 * i}" text-anchor="end" '
                     f'fill="{color}">{label}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
