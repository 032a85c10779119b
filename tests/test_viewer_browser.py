"""The trajectory viewer in a real browser: the page opens with no console errors, the filters
and sorting work, a trajectory expands, and every rendered token's colour is the ledger's loss
mask (read back from the DOM and compared with the JSONL, token for token)."""

from __future__ import annotations

import pytest

from tests.browser_helpers import browser  # noqa: F401 (a fixture: one Chromium per module)
from tests.viewer_helpers import write_episodes
from tir_envs.trajectory import read_jsonl
from tir_envs.viewer import write_page

POLICY_RGB, ENV_RGB, PROMPT_RGB = "rgb(219, 234, 254)", "rgb(229, 231, 235)", "rgb(254, 243, 199)"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    folder = tmp_path_factory.mktemp("viewer")
    traj = write_episodes(folder / "traj.jsonl")
    return write_page(traj, folder / "page.html"), read_jsonl(traj)


def _rows(browser) -> list[list[str]]:
    return [[td.text for td in tr.find_elements("css selector", "td")]
            for tr in browser.find_elements("css selector", "#runs tbody tr")]


def _select(browser, select_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", select_id)).select_by_value(value)


def test_page_opens_without_console_errors(page, browser):
    path, ledgers = page
    browser.get(path.as_uri())
    assert browser.title.startswith("tir-envs view")
    assert len(_rows(browser)) == len(ledgers)
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []
    assert browser.execute_script("return window.pwned === undefined")


def test_filters_and_sorting(page, browser):
    path, ledgers = page
    browser.get(path.as_uri())
    _select(browser, "f-verdict", "correct")
    rows = _rows(browser)
    assert len(rows) == sum(t.correct is True for t in ledgers) and \
        {r[4] for r in rows} == {"correct"}
    _select(browser, "f-verdict", "failed")
    assert [r[8] for r in _rows(browser)] == ["policy_error"]
    _select(browser, "f-verdict", "")
    _select(browser, "f-status", "policy_error")
    assert len(_rows(browser)) == 1
    _select(browser, "f-status", "")
    browser.find_element("css selector", "th[data-key=reward]").click()
    rewards = [float(r[5]) for r in _rows(browser)]
    assert rewards == sorted(rewards) and len(rewards) == len(ledgers)
    browser.find_element("css selector", "th[data-key=reward]").click()
    assert [float(r[5]) for r in _rows(browser)] == sorted(rewards, reverse=True)


def test_expanded_trajectory_colours_equal_the_loss_mask(page, browser):
    path, ledgers = page
    browser.get(path.as_uri())
    for index, traj in enumerate(ledgers):
        browser.find_element("css selector", f"#runs tbody tr[data-i='{index}']").click()
        assert browser.find_element("id", "episode").is_displayed()
        shown = browser.execute_script("""
            return Array.from(document.querySelectorAll('#stream .t')).map(s => [
                s.classList.contains('prompt'), getComputedStyle(s).backgroundColor,
                s.textContent, s.title]);""")
        prompt = [s for s in shown if s[0]]
        tokens = [s for s in shown if not s[0]]
        assert len(prompt) == len(traj.prompt_ids) and len(tokens) == len(traj.token_ids)
        assert {s[1] for s in prompt} <= {PROMPT_RGB}
        colours = [s[1] for s in tokens]
        assert colours == [POLICY_RGB if m else ENV_RGB for m in traj.loss_mask]
        for i, (_, _, _, title) in enumerate(tokens):
            assert f"id {traj.token_ids[i]}" in title
            if traj.loss_mask[i] and traj.has_logprobs:
                assert f"logprob {traj.logprobs[i]:.4f}" in title
        calls = browser.find_elements("css selector", "table.turns tr.turn-row")
        assert len(calls) == len(traj.turns)
        stop = browser.find_element("css selector", "dd[data-fact='stop reason']").text
        assert stop == traj.stop_reason
    assert browser.execute_script("return window.pwned === undefined")
