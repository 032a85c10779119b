"""Issue 36 item 5: the viewer at real sizes, in a real browser.  One page of rows is in the
DOM however many episodes the run has, sorting and filters still see every row, a trajectory
is decoded only when opened (from its chunk), and a training dump gets a step column and
filter."""

from __future__ import annotations

import json
import re

import pytest

from tests.browser_helpers import browser  # noqa: F401 (a fixture: one Chromium per module)
from tests.viewer_helpers import write_episodes
from tir_envs.viewer import write_page
from tir_envs.viewer.page import CHUNK

N = 2 * CHUNK + 90  # three chunks, seven pages of 100


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    """A GRPO-style dump folder: step_00000.jsonl ... one file per step, 100 episodes each."""
    folder = tmp_path_factory.mktemp("viewer-scale")
    base = write_episodes(folder / "base.jsonl").read_text().splitlines()
    dumps = folder / "rollouts"
    dumps.mkdir()
    for step in range(0, N, 100):
        with open(dumps / f"step_{step // 100:05d}.jsonl", "w") as f:
            for i in range(step, min(step + 100, N)):
                d = json.loads(base[i % len(base)])
                d["reward"] = float(i)  # distinct, so a sort has one right order
                f.write(json.dumps(d) + "\n")
    return write_page(dumps, folder / "page.html"), base


def _rows(browser) -> list[list[str]]:
    return browser.execute_script("""return Array.from(document.querySelectorAll('#runs tbody tr'))
        .map(tr => Array.from(tr.children).map(td => td.textContent));""")


def test_trajectories_are_chunked_out_of_the_row_data(dump):
    page, _ = dump
    html = page.read_text()
    chunks = re.findall(r'<script type="application/json" id="ep-(\d+)">', html)
    assert chunks == ["0", "1", "2"]
    data = json.loads(re.search(r'id="data">(.*?)</script>', html, re.S).group(1))
    assert "episodes" not in data and len(data["rows"]) == N and data["chunk"] == CHUNK


def test_one_page_of_rows_and_every_row_sorted(dump, browser):
    page, _ = dump
    browser.get(page.as_uri())
    rows = _rows(browser)
    assert len(rows) == 100 and rows[0][0] == "0"
    assert browser.find_element("id", "shown").text == f"{N} of {N} shown"
    browser.find_element("id", "next").click()
    assert _rows(browser)[0][0] == "100"
    browser.find_element("css selector", "th[data-key=reward]").click()  # ascending, page 1
    browser.find_element("css selector", "th[data-key=reward]").click()  # descending
    rows = _rows(browser)
    assert [float(r[5]) for r in rows] == [float(N - 1 - k) for k in range(100)]
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []


def test_a_row_of_a_later_chunk_opens_its_own_trajectory(dump, browser):
    page, base = dump
    browser.get(page.as_uri())
    assert browser.execute_script("return document.getElementById('episode').hidden")
    for _ in range(5):
        browser.find_element("id", "next").click()
    row = browser.find_element("css selector", "#runs tbody tr[data-i='530']")
    row.click()
    tokens = browser.execute_script(
        "return document.querySelectorAll('#stream .t:not(.prompt)').length")
    assert tokens == len(json.loads(base[530 % len(base)])["token_ids"])
    assert "Episode 530" in browser.find_element("css selector", "#episode h2").text
    assert "open" in row.get_attribute("class")


def test_a_training_dump_has_a_step_column_and_filter(dump, browser):
    page, _ = dump
    browser.get(page.as_uri())
    assert browser.find_element("id", "step-col").is_displayed()
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "f-step")).select_by_value("3")
    rows = _rows(browser)
    assert len(rows) == 100 and {r[10] for r in rows} == {"3"}
    assert {int(r[0]) // 100 for r in rows} == {3}
