"""The trajectory viewer at real sizes: page build time, then load and interaction latency in a
real Chromium (selenium), at 1k, 5k and 20k episodes.  Goal: every interaction < 100 ms at 20k.

Episodes are real ledgers: a few MathCode episodes (a scripted policy calling the sandbox, with
logprobs) collected once, then repeated with their own item, sample and training step, as a GRPO
dump of 80 steps x 256 episodes holds them; each copy is re-split into token pieces when the page
is built, as a real run's would be.

Figures per size:
  * ``build_s``: ``write_page`` (read the JSONL, token pieces, JSON, HTML) and ``page_mb``;
  * ``load_ms``: navigation start to the table drawn (``window.__viewerReady``, set by a
    probe at the end of the page's script run);
  * per interaction, the median and max of ``REPEATS`` tries, in ms: the handler run
    synchronously by a dispatched event plus the layout it forces (``offsetHeight``), timed in
    the page with ``performance.now()`` (paint is not included): ``open_row`` (click a row
    whose chunk is not parsed yet, so it includes lazy decoding), ``sort`` (click a column
    header), ``filter`` (change the verdict filter), ``step_filter`` (change the step filter),
    ``next_page``.

``PERF_QUICK=1`` uses 100 and 300 episodes; ``VIEWER_SIZES=20000`` picks sizes.  Without
Chromium (Debian's ``chromium`` and ``chromium-driver``) or selenium, the browser part is
skipped with the reason printed.
Prints JSON, with the 1-minute load average before and after.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tir_envs.bench.perf.quick import pick  # noqa: E402

SIZES = tuple(int(x) for x in os.environ["VIEWER_SIZES"].split(",")) \
    if os.environ.get("VIEWER_SIZES") else pick((1000, 5000, 20000), (100, 300))
REPEATS = pick(7, 3)
PER_STEP = 256


def real_episodes() -> list[dict]:
    """A few real MathCode ledgers (sandbox calls, logprobs), as dicts."""
    from tir_envs.rollout import ScriptedPolicy, collect

    def script(context: str) -> str:
        if "```output" not in context.split("Assistant:")[-1]:
            return ("Let me compute this carefully step by step with Python.\n```python\n"
                    "values = [i * i for i in range(1, 20)]\nprint(sum(values))\n```\n```output")
        return "The sum of the squares is 2470, so the final answer is \\boxed{2470}."

    runs = collect("tir/MathCode-v0", ScriptedPolicy(script, logprob=-0.3), tasks=8,
                   env_kwargs={"protocol": "torl", "tasks": "gsm8k"}, progress=False)
    return [json.loads(t.to_json()) for t in runs]


def write_dump(base: list[dict], n: int, out: Path) -> Path:
    """``n`` episodes as a training dump's JSONL: each a copy of a real one, with its step."""
    with open(out, "w", encoding="utf-8") as f:
        for i in range(n):
            d = json.loads(json.dumps(base[i % len(base)]))
            d["metadata"] = {**d.get("metadata", {}), "group": i // 8, "sample": i % 8,
                             "step": i // PER_STEP}
            d["correct"] = i % 3 == 0
            d["reward"] = 1.0 if d["correct"] else 0.0
            f.write(json.dumps(d) + "\n")
    return out


def build(jsonl: Path, folder: Path) -> tuple[Path, float]:
    from tir_envs.viewer import write_page

    started = time.perf_counter()
    page = write_page(jsonl, folder / f"{jsonl.stem}.html")
    return page, time.perf_counter() - started


#: in-page timing of one interaction: the event's handlers run synchronously, then layout
_TIMED = """
const [what, arg] = arguments;
const t0 = performance.now();
if (what === 'click') document.querySelector(arg).click();
else { const s = document.getElementById(what); s.value = arg;
       s.dispatchEvent(new Event('change')); }
document.body.offsetHeight;
return performance.now() - t0;
"""


def browser_figures(page: Path, n: int, driver) -> dict:
    driver.get(page.as_uri())
    load_ms = None
    deadline = time.monotonic() + 300
    while load_ms is None and time.monotonic() < deadline:  # a big page may still be parsing
        load_ms = driver.execute_script(
            "return window.__viewerReady ? window.__viewerReady - "
            "performance.timing.navigationStart : null;")
        if load_ms is None:
            time.sleep(0.2)
    if load_ms is None:
        return {"error": "the page did not finish loading within 300 s"}
    times: dict[str, list[float]] = {k: [] for k in
                                     ("open_row", "sort", "filter", "step_filter", "next_page")}
    for r in range(REPEATS):
        # a row of a chunk not parsed yet: go to a far page first, then click its first row
        driver.execute_script(_TIMED, "page-size", "100")
        times["next_page"].append(driver.execute_script(_TIMED, "click", "#next"))
        times["sort"].append(driver.execute_script(
            _TIMED, "click", "th[data-key=reward]" if r % 2 else "th[data-key=i]"))
        times["filter"].append(driver.execute_script(
            _TIMED, "f-verdict", "correct" if r % 2 == 0 else ""))
        step = str((n // PER_STEP) - r % max(1, n // PER_STEP)) if n >= PER_STEP else "0"
        times["step_filter"].append(driver.execute_script(_TIMED, "f-step", step))
        driver.execute_script(_TIMED, "f-step", "")
        driver.execute_script(_TIMED, "f-verdict", "")
        driver.execute_script(_TIMED, "page-size", "500")
        for _ in range(r + 1):  # far pages: their rows' chunk is not parsed yet
            driver.execute_script(_TIMED, "click", "#next")
        times["open_row"].append(driver.execute_script(
            _TIMED, "click", "#runs tbody tr:nth-child(%d)" % (1 + r)))
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    return {"load_ms": round(load_ms, 1),
            **{k: {"median_ms": round(statistics.median(v), 1), "max_ms": round(max(v), 1)}
               for k, v in times.items()},
            "console_errors": len(errors)}


def chromium(profile: str):
    """A headless Chromium driver, or the reason there is none."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None, "selenium is not installed (pip install -e '.[dev]')"
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_bin = shutil.which("chromedriver")
    if not browser or not driver_bin:
        return None, ("no Chromium: apt-get install -y chromium chromium-driver (Debian), "
                      "then rerun")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver_bin), options=options), None


def ready_probe(page: Path) -> None:
    """Mark when the page's script has drawn the table (its last script element)."""
    html = page.read_text(encoding="utf-8")
    probe = "<script>window.__viewerReady = performance.now() + performance.timeOrigin;</script>"
    page.write_text(html.replace("</body>", probe + "\n</body>"), encoding="utf-8")


def main() -> None:
    out: dict = {"sizes": list(SIZES), "repeats": REPEATS,
                 "load_avg_1m_before": round(os.getloadavg()[0], 2), "results": {}}
    base = real_episodes()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        driver, reason = chromium(str(folder / "profile"))
        if driver is None:
            out["browser_skipped"] = reason
            print(f"viewer perf: browser part skipped: {reason}", file=sys.stderr)
        try:
            for n in SIZES:
                jsonl = write_dump(base, n, folder / f"dump{n}.jsonl")
                page, build_s = build(jsonl, folder)
                row = {"build_s": round(build_s, 2),
                       "page_mb": round(page.stat().st_size / 2**20, 2)}
                if driver is not None:
                    ready_probe(page)
                    row.update(browser_figures(page, n, driver))
                out["results"][str(n)] = row
                print(json.dumps({str(n): row}), file=sys.stderr)
        finally:
            if driver is not None:
                driver.quit()
    out["load_avg_1m_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
