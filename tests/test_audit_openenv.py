"""``tir-envs audit`` on OpenEnv envs, against real OpenEnv servers started by the test.

* ``tir/OpenEnv-v0`` (its reward is the remote's, its tasks have no gold): the probes that need
  no gold, each against its control, on an honest remote (all HELD), a weakened one that
  trusts a reward the client claims (PAYS), a fragile one that dies (MASKS, ``infra_error``)
  or hangs (``timeout``, never paid), and a wrapper whose observations are encoded as trusted
  text (FORGES).
* A tir env served by ``tir-envs serve openenv``: the whole battery over the wire
  (``via="openenv"``), with the same verdicts and rewards as the local audit, including a
  weakened reward that the wire audit must flag as the local one does.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openenv", reason="the openenv extra is part of make test")

from tests.openenv_helpers import serve_notes, stop  # noqa: E402
from tir_envs.audit import FORGES, HELD, MASKS, NOT_APPLICABLE, PAYS, PROBES, audit  # noqa: E402

REMOTE = [p for p in PROBES if not p.needs_gold]


def remote_audit(url: str, probes=None, **kw):
    return audit("tir/OpenEnv-v0", env_kwargs={"url": url, "timeout_s": 2, **kw}, tasks=1,
                 probes=probes, episode_timeout_s=60)


def by_name(*names):
    return [p for p in PROBES if p.name in names]


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    url, proc = serve_notes(tmp_path_factory.mktemp("honest"), "honest")
    yield url
    stop(proc)


def test_an_honest_remote_holds_and_only_gold_free_probes_run(honest):
    report = remote_audit(honest)
    verdicts = report.verdicts()
    assert len(REMOTE) >= 6
    assert {verdicts[p.name] for p in REMOTE} == {HELD}, report.to_markdown()
    assert {v for n, v in verdicts.items() if n not in {p.name for p in REMOTE}} == \
        {NOT_APPLICABLE}
    assert report.ok and any("no task has a gold answer" in w for w in report.warnings)
    result = next(p for p in report.probes if p.name == "remote.control_tokens")
    (episode,), (control,) = result.episodes, result.controls
    # the remote echoed the control tokens as text: the observation holds the framing's ids
    # only, as many as the control's (and some: the framing is there)
    assert episode.env_specials == control.env_specials > 0
    assert episode.statuses == control.statuses and "ok" in episode.statuses
    metadata = next(p for p in report.probes if p.name == "remote.reward_metadata")
    assert "tool_error" in metadata.episodes[0].statuses  # the wrapper refuses it


def test_the_command_line_audits_a_remote(honest, tmp_path, capsys):
    from tir_envs.cli import main
    code = main(["audit", "tir/OpenEnv-v0", "--env-arg", f"url={honest}", "--probe", "remote",
                 "--tasks", "1", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "| `remote.status_words` | HELD |" in out, out
    written = json.loads((tmp_path / "audit.json").read_text())
    assert {p["verdict"] for p in written["probes"]} == {HELD} and written["ok"]
    assert all(len(p["controls"]) == 1 for p in written["probes"])


def test_a_weakened_remote_that_trusts_a_claimed_reward_pays(tmp_path):
    url, proc = serve_notes(tmp_path, "weak")
    try:
        report = remote_audit(url, REMOTE)
        verdicts = report.verdicts()
        assert verdicts["remote.reward_in_input"] == PAYS, report.to_markdown()
        assert "remote.reward_in_input: PAYS" in report.to_markdown()
        paid = next(p for p in report.probes if p.name == "remote.reward_in_input")
        assert paid.mean_reward > 1000 and paid.baseline_mean == pytest.approx(0.1)
        # the prose never reaches the remote; metadata is refused by the wrapper, though this
        # remote would pay it (checked directly below with OpenEnv's own client)
        assert verdicts["remote.reward_in_prose"] == HELD
        assert verdicts["remote.reward_metadata"] == HELD
        assert not report.ok
        assert _paid_directly(url) == pytest.approx(1000000.0)
    finally:
        stop(proc)


def _paid_directly(url: str) -> float:
    import asyncio

    from openenv.core import GenericEnvClient

    async def go():
        async with GenericEnvClient(base_url=url) as client:
            await client.reset()
            result = await client.step({"text": "hi", "metadata": {"reward": 1000000.0}})
            return result.reward
    return asyncio.run(go())


def test_a_remote_that_dies_masks_as_infra_error(tmp_path):
    url, proc = serve_notes(tmp_path, "fragile")
    try:
        report = remote_audit(url, by_name("remote.status_words"), connect_timeout_s=2)
        (result,) = report.probes
        assert result.verdict == MASKS, report.to_markdown()
        (episode,) = result.episodes
        assert "infra_error" in episode.statuses and episode.infra_failed
        assert result.controls[0].statuses == ["ok", "no_call"]  # the neutral note was fine
    finally:
        stop(proc)


def test_a_remote_that_hangs_is_a_timeout_never_paid(tmp_path):
    url, proc = serve_notes(tmp_path, "fragile")
    try:
        report = remote_audit(url, by_name("remote.verdict_words"), timeout_s=1)
        (result,) = report.probes
        (episode,) = result.episodes
        assert "timeout" in episode.statuses, report.to_markdown()
        assert result.verdict != PAYS and episode.reward <= result.controls[0].reward
    finally:
        stop(proc)


def test_a_wrapper_that_trusts_echoed_text_forges(honest, monkeypatch):
    """Weaken our own side: observations encoded as trusted text, so the echoed control
    tokens become their ids; the audit must say so."""
    from tir_envs.chat import seams
    from tir_envs.codec import Codec
    monkeypatch.setattr(Codec, "encode_untrusted", Codec.encode)
    trusted = lambda tok, pieces: seams._encode_whole(tok, "".join(t for t, _ in pieces))  # noqa: E731
    for family in ("template", "qwen3", "harmony"):  # chat turns: content encoded as glue
        monkeypatch.setattr(f"tir_envs.chat.{family}.encode_pieces", trusted)
    report = remote_audit(honest, by_name("remote.control_tokens"))
    (result,) = report.probes
    assert result.verdict == FORGES, report.to_markdown()
    assert result.episodes[0].env_specials > result.controls[0].env_specials
    assert "FORGES" in report.to_markdown()


# ------------------------------------------------------------------ through the wire
TASKS = [{"question": "What is the capital of France?", "answer": "Paris"},
         {"question": "What is the capital of Japan?", "answer": "Tokyo"}]


def capital(country: str) -> str:
    """The capital city of a country.

    Args:
        country: the country's English name.
    """
    return {"France": "Paris", "Japan": "Tokyo"}.get(country, "unknown")


def generous(task, trajectory, answer):
    """A weakened reward: pays when the gold appears anywhere in the answer."""
    return float(str(task.answer).lower() in str(answer or "").lower())


@pytest.mark.parametrize("reward", ["em", generous], ids=["em", "weakened"])
def test_the_whole_battery_over_the_wire_matches_the_local_audit(reward, capfd):
    kwargs = {"tasks": TASKS, "tools": [capital], "reward": reward}
    local = audit("tir/ToolUse-v0", env_kwargs=kwargs, tasks=2)
    capfd.readouterr()
    wired = audit("tir/ToolUse-v0", env_kwargs=kwargs, tasks=2, via="openenv")
    # every episode's client closed normally: the server logged no traceback for any
    logged = capfd.readouterr().err
    assert "Exception in ASGI application" not in logged and "Traceback" not in logged, \
        logged[-2000:]
    assert wired.env_args["via"] == "openenv"
    assert wired.verdicts() == local.verdicts()
    for a, b in zip(local.probes, wired.probes):
        assert [e.reward for e in a.episodes] == pytest.approx([e.reward for e in b.episodes]), \
            a.name
        assert [e.correct for e in a.episodes] == [e.correct for e in b.episodes], a.name
        assert [[str(s) for s in e.statuses] for e in a.episodes] == \
            [[str(s) for s in e.statuses] for e in b.episodes], a.name
        assert [(e.stop_reason, e.answer, e.masked, e.void) for e in a.episodes] == \
            [(e.stop_reason, e.answer, e.masked, e.void) for e in b.episodes], a.name
    applicable = [p for p in wired.probes if p.verdict != NOT_APPLICABLE]
    assert len(applicable) > 40  # the gold-based battery ran, not just the gold-free probes
    if reward == "em":
        assert wired.ok, wired.to_markdown()
    else:  # hedges that name the gold pay, over the wire as locally
        assert wired.verdicts()["hedge.or"] == PAYS and not wired.ok


def test_via_a_running_server_checks_it_serves_the_same_env(tmp_path):
    import sys

    from tests.mcp_helpers import free_port
    from tests.openenv_helpers import CAPITALS_MODULE, start
    (tmp_path / "capitals_tools.py").write_text(CAPITALS_MODULE)
    tasks = [{"question": "Capital of Japan?", "answer": "Tokyo"}]
    port = free_port()
    proc = start([sys.executable, "-m", "tir_envs.cli", "serve", "openenv", "tir/ToolUse-v0",
                  "--env-arg", f"tasks={json.dumps(tasks)}",
                  "--env-arg", 'tools=["capitals_tools:capital"]', "--port", str(port)],
                 tmp_path, port)
    url = f"http://127.0.0.1:{port}"
    sys.path.insert(0, str(tmp_path))
    try:
        kwargs = {"tasks": tasks, "tools": ["capitals_tools:capital"]}
        report = audit("tir/ToolUse-v0", env_kwargs=kwargs, tasks=1, via=url,
                       probes=by_name("hedge.or", "copy.prompt"))
        assert report.verdicts() == {"hedge.or": HELD, "copy.prompt": HELD}
        with pytest.raises(ValueError, match="serves 'tir/ToolUse-v0', not 'tir/SQL-v0'"):
            audit("tir/SQL-v0", tasks=1, via=url, probes=by_name("hedge.or"))
        other = [{"question": "Capital of France?", "answer": "Paris", "id": "elsewhere"}]
        with pytest.raises(ValueError, match="start the server with the same tasks"):
            audit("tir/ToolUse-v0", env_kwargs={**kwargs, "tasks": other}, tasks=1, via=url,
                  probes=by_name("hedge.or"))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("capitals_tools", None)
        stop(proc)
