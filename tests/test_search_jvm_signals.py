"""In-process Lucene survives code that replaces the process's SIGSEGV handler.

The JVM takes SIGSEGV on purpose while running Java (null checks, safepoint polls); ``ray.init``
installs Ray's crash reporter and Python's ``faulthandler`` over its handler and ``ray.shutdown``
leaves the default action, after which the next routine fault killed the whole process (a CI
run died this way: "Segmentation fault" right after the Ray replica tests).  Each case runs in
its own interpreter, so a crash is an exit status here, not the end of the test session.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.search_helpers import hotpotqa_index

#: searches many queries on Java threads while a Python thread keeps asking the JVM to collect:
#: GC safepoints while compiled code runs make the JVM fault on purpose, many times a second
LOAD = """
import sys, threading
from tir_envs.tools.search import open_retriever
from tir_envs.tools.search import jvm
r = open_retriever(sys.argv[1])
r.search("warm up the jvm", 3)
{replace}
System, done = jvm.autoclass("java.lang.System"), threading.Event()
def collect():
    while not done.is_set():
        System.gc()
        done.wait(0.01)
threading.Thread(target=collect).start()
queries = [f"capital of france river {{i}} history war" for i in range(2000)]
try:
    for _ in range(2):  # 4,000 searches on Java threads while the JVM collects
        hits = r.batch_search(queries, 5, threads=4)
        assert len(hits) == len(queries) and all(hits)
finally:
    done.set()
restored = jvm._sigaction(11)[:8] == jvm._jvm_actions[11][:8]
print("SURVIVED", "restored" if restored else "not-restored")
"""


def _run(replace: str, tmp_path) -> subprocess.CompletedProcess:
    """The load after ``replace`` ran, in an interpreter with faulthandler on from its start
    (as under pytest: the JVM's handlers then replace faulthandler's)."""
    script = tmp_path / "load.py"
    script.write_text(textwrap.dedent(LOAD.format(replace=replace)))
    return subprocess.run([sys.executable, "-X", "faulthandler", str(script),
                           str(hotpotqa_index("lucene"))],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)


def test_searches_survive_faulthandler_enable_then_disable(tmp_path):
    """faulthandler.disable() (pytest's last act) restores what faulthandler found at the
    interpreter's start: SIGSEGV's default action, over the JVM's handler."""
    proc = _run("import faulthandler\nfaulthandler.disable()\n"
                "assert jvm._sigaction(11)[:8] == bytes(8)  # SIG_DFL: the crash set-up",
                tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "SURVIVED restored" in proc.stdout
    assert "handler(s) had been replaced" in proc.stderr


def test_searches_survive_ray_init_and_shutdown(tmp_path):
    pytest.importorskip("ray")
    for replace in ("import ray\nray.init(num_cpus=1, include_dashboard=False, "
                    "log_to_driver=False)",  # Ray alive in this process while it searches
                    "import ray\nray.init(num_cpus=1, include_dashboard=False, "
                    "log_to_driver=False)\nray.shutdown()"):
        proc = _run(replace, tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "SURVIVED restored" in proc.stdout


def test_nothing_to_restore_when_nothing_replaced_the_handlers():
    from tir_envs.tools.search import jvm
    from tests.search_helpers import small_index
    from tir_envs.tools.search import open_retriever
    with open_retriever(small_index("lucene")) as r:
        r.search("paris", 1)
        assert jvm.keep_signal_handlers() == []


FOREIGN = """
import faulthandler, logging, os, sys
logging.basicConfig()
from tir_envs.tools.search import jvm, open_retriever
import jnius_config
jnius_config.add_classpath(jvm.anserini_jar())
jnius_config.add_options(*jvm.JVM_OPTIONS)
os.environ["JAVA_HOME"] = jvm.java_home()
import jnius  # the JVM started by other code, before tir_envs ever looked
faulthandler.disable()  # ... and its SIGSEGV handler gone before tir_envs looks
retriever = open_retriever(sys.argv[1])
print("RECORDED", bool(jvm._jvm_actions))
"""


def test_a_jvm_started_elsewhere_with_its_handlers_gone_is_named_once(tmp_path):
    """Nothing to put back then (the JVM's handlers were never seen): one warning, and the
    default action is not recorded as if it were the JVM's."""
    script = tmp_path / "foreign.py"
    script.write_text(FOREIGN)
    proc = subprocess.run([sys.executable, "-X", "faulthandler", str(script),
                           str(hotpotqa_index("lucene"))], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "RECORDED False" in proc.stdout
    assert proc.stderr.count("handler was replaced (now the default action)") == 1, proc.stderr
