"""The Ray backend on a real local Ray instance: sessions served by sandbox-host actors, one
pool shared by several backends and by a second driver process, a dead host replaced."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from tests.sandbox_helpers import call, close_session, open_session, session_of  # noqa: E402
from tir_envs.tools.base import Status  # noqa: E402
from tir_envs.tools.python import PythonTool  # noqa: E402
from tir_envs.tools.python.backends.ray_backend import RayBackend  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "tir_envs_test"


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, namespace=NAMESPACE,
             runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def test_sessions_run_on_host_actors(cluster):
    t = PythonTool(backend=RayBackend(name="basic", namespace=NAMESPACE, spares=1), timeout_s=2)
    with session_of(t) as s:
        assert call(t, "x = 20", s).status == Status.OK
        r = call(t, "print('from ray')\nx + 22", s)
        assert r.status == Status.OK and r.text == "from ray\n42"
        assert r.metadata["backend"] == "ray" and r.metadata["isolation"] in ("bwrap", "unshare",
                                                                      "rlimits")
        assert call(t, "1/0", s).metadata["error_last_line"] == "ZeroDivisionError: division by zero"
        info = asyncio.run(t.backend.info())[0]
        assert info["sessions"] == 1
        assert info["node"] in {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        r = call(t, "while True:\n    pass", s)
        assert r.status == Status.TIMEOUT and not r.metadata["restarted"]  # interrupted
        assert call(t, "x", s).text == "20"
    assert asyncio.run(t.backend.info())[0]["sessions"] == 0


DRIVER = """
import asyncio, sys
sys.path.insert(0, {repo!r})
import ray
ray.init(address={address!r}, namespace={ns!r}, log_to_driver=False)
from tir_envs.tools.python import PythonTool
from tir_envs.tools.python.backends.ray_backend import RayBackend
backend = RayBackend(name="shared", namespace={ns!r}, spares=1)
tool = PythonTool(backend=backend)
async def main():
    s = await tool.open_session()
    r = await tool.call({{"code": "40 + 2"}}, s)
    info = await backend.info()
    print(r.text, info[0]["sessions"])
    await tool.close_session(s)
asyncio.run(main())
"""


def test_one_pool_serves_several_trainers(cluster):
    a = PythonTool(backend=RayBackend(name="shared", namespace=NAMESPACE, spares=1))
    b = PythonTool(backend=RayBackend(name="shared", namespace=NAMESPACE, spares=1))
    sa, sb = open_session(a), open_session(b)
    try:
        call(a, "who = 'a'", sa)
        call(b, "who = 'b'", sb)
        assert call(a, "who", sa).text == "'a'" and call(b, "who", sb).text == "'b'"
        assert asyncio.run(a.backend.info())[0]["sessions"] == 2  # one host serves both
        script = DRIVER.format(repo=str(REPO), address=cluster, ns=NAMESPACE)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             timeout=180)
        assert out.stdout.split() == ["42", "3"], out.stderr[-2000:]  # a second process too
    finally:
        close_session(a, sa)
        close_session(b, sb)


def test_dead_host_is_replaced(cluster):
    t = PythonTool(backend=RayBackend(name="fragile", namespace=NAMESPACE, spares=1))
    s = open_session(t)
    call(t, "v = 1", s)
    ray.kill(t.backend.host(0))
    r = call(t, "v", s)
    assert r.status == Status.INFRA_ERROR and "not your fault" in r.text
    r = call(t, "'new host'", s)
    assert r.status == Status.OK and r.text == "'new host'"
    close_session(t, s)


def test_the_openrlhf_adapters_env_settings_reach_the_ray_backend(cluster):
    """The adapter's JSON env settings (TIR_ENV_KWARGS, as set on every node of a Ray job)
    carry the sandbox backend's own options: hosts and actor placement, not only its name."""
    from tir_envs.tools.python.backends.registry import make_backend
    from tir_envs.trainers.common.env_config import ConfigError, EnvConfig

    kwargs = {"protocol": "torl", "backend": {
        "name": "ray", "num_hosts": 2, "namespace": NAMESPACE, "spares": 0,
        "actor_options": {"num_cpus": 0.5}}}
    config = EnvConfig.from_environ({"TIR_ENV_ID": "tir/MathCode-v0",
                                     "TIR_ENV_KWARGS": json.dumps(kwargs)})
    env = config.make()
    try:
        backend = env.unwrapped.tools["python"].backend
        assert isinstance(backend, RayBackend)
        assert backend.num_hosts == 2 and backend.actor_options["num_cpus"] == 0.5
        env.reset(options={"task": {"question": "What is 6*7?", "answer": "42"}})
        obs, *_ = env.step("```python\nprint(6*7)\n```\n```output")
        result = env.unwrapped.trajectory.turns[0].tool_results[0]
        assert result["status"] == "ok"
        assert "42" in env.unwrapped.codec.decode(obs["tokens"].tolist())
        names = {(a["namespace"], a["name"]) for a in ray.util.list_named_actors(
            all_namespaces=True)}
        assert (NAMESPACE, "tir-python-sandbox-0") in names  # a host made by those options
    finally:
        env.close()
    with pytest.raises(ConfigError, match="needs the backend's 'name'"):
        EnvConfig("tir/MathCode-v0", {"backend": {"num_hosts": 4}})
    with pytest.raises(ValueError, match="needs its 'name'"):
        make_backend({"num_hosts": 2})
