"""Fresh random state for every interpreter and every stateless cell.

Forked children share the fork server's random state, so each gets its own: Python's
``random``, numpy's legacy global generator and sympy's private generators, each from fresh
bits of the OS.  The string hash seed cannot change in a running interpreter: it is the fork
server's (see docs/sandbox.md, "The string hash seed").

``reseed`` is the general form (numpy's ``seed()`` from 128 bits; it also clears numpy's
cached Gaussian).  ``CellReseeder`` is what a stateless template runs before each cell's
fork: the same for Python's and sympy's generators, but numpy's Mersenne Twister state is
filled straight from ``getrandom`` (623 words of fresh bits, the first word's top bit set, as
numpy's own unseeded start does) instead of going through ``seed()``, whose array
conversion, casts and ufunc calls touch ~65 pages of the template per call (measured with
``perf``: the template writes them again after every fork, one page fault each).
"""

from __future__ import annotations

import ctypes
import os
import random
import sys

MT_WORDS = 624              # numpy's mt19937_state: uint32_t key[624]; int pos
MT_KEY_BYTES = 4 * MT_WORDS


def reseed() -> None:
    """Each generator from 128 fresh bits of one ``os.urandom`` read (seeding from numbers
    costs microseconds; numpy's ``seed()`` from the OS costs ~0.1 ms)."""
    fresh = os.urandom(64)
    random.seed(int.from_bytes(fresh[:16], "little"))
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            np.random.seed(list(memoryview(fresh[16:32]).cast("I")))
        except Exception:  # noqa: BLE001
            pass
    _reseed_sympy(fresh[32:64])


def _reseed_sympy(fresh: bytes) -> None:
    sympy_random = sys.modules.get("sympy.core.random")
    for i, name in enumerate(("rng", "_assumptions_rng")):
        gen = getattr(sympy_random, name, None)
        if isinstance(gen, random.Random):
            gen.seed(int.from_bytes(fresh[16 * i:16 * i + 16], "little"))


class CellReseeder:
    """Built once in a stateless template, after its last full ``reseed`` (nothing in a
    template draws from numpy, so its cached Gaussian stays clear for every cell)."""

    def __init__(self):
        self._mt = None
        np = sys.modules.get("numpy")
        try:
            gen = np.random.mtrand._rand._bit_generator
            if type(gen).__name__ != "MT19937":
                raise TypeError(type(gen).__name__)
            addr = gen.ctypes.state_address
            getrandom = ctypes.CDLL(None, use_errno=True).getrandom
        except Exception:  # noqa: BLE001 - no numpy, or one laid out otherwise: seed()
            return
        getrandom.restype = ctypes.c_ssize_t
        getrandom.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
        self._getrandom, self._addr = getrandom, addr
        self._mt = (ctypes.c_uint32 * (MT_WORDS + 1)).from_address(addr)  # key, then pos

    def __call__(self) -> None:
        if self._mt is None or self._getrandom(self._addr, MT_KEY_BYTES, 0) != MT_KEY_BYTES:
            reseed()
            return
        self._mt[0] = 0x80000000    # never the all-zero state
        self._mt[MT_WORDS] = MT_WORDS  # pos: regenerate before the first draw
        fresh = os.urandom(48)
        random.seed(int.from_bytes(fresh[:16], "little"))
        _reseed_sympy(fresh[16:48])
