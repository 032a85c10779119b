import signal
import sys

import pytest

from tests.fixtures.tiny import qwen_tokenizer, tiny_tokenizer


@pytest.fixture(scope="session")
def qwen_tok():
    """The real Qwen2.5 tokenizer (bundled vocab + merges, 22 added tokens, ChatML)."""
    return qwen_tokenizer()


@pytest.fixture(scope="session")
def tiny_tok():
    return tiny_tokenizer()


def pytest_configure(config):
    """Started in the background by a shell without job control (``nohup make test &``, a
    ``( ... & )`` subshell), this process inherits SIGINT ignored, and so would every program a
    test starts: an ignored signal stays ignored across exec, and Python then never raises
    KeyboardInterrupt, so the Ctrl-C tests' children ran on to the end (three failures in a
    fresh clone run that way).  A handler, unlike an ignore, is reset to the default at exec."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_runtest_teardown(item):
    """A test that ran Ray in this process replaced SIGSEGV's handler (ray.init, ray.shutdown):
    give the in-process JVM its own back at once, not only at the next search, so a routine
    fault of Java code between tests cannot end the session."""
    jvm = sys.modules.get("tir_envs.tools.search.jvm")
    if jvm is not None:
        jvm.keep_signal_handlers()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """pytest's faulthandler plugin has just disabled faulthandler, which reinstates SIGSEGV's
    default action over the JVM's handler while the JVM still runs until the interpreter exits."""
    jvm = sys.modules.get("tir_envs.tools.search.jvm")
    if jvm is not None:
        jvm.keep_signal_handlers()
