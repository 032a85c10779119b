"""The local sandbox pool, host side: pre-forked interpreters handed to episodes.

``sandbox_pool`` (``SandboxPool``, ``get_pool``) runs sessions over fork servers
(``fork_servers``, started by ``launcher``), each session a state machine (``session``) whose
calls (``calls``) and parked templates (``templates``) are driven by one reactor thread
(``reactor``); ``config`` is the pool's settings.  The code that runs inside the sandbox is
``tir_envs.tools.python.sandbox``; the confinement the host applies, ``isolation``.
"""
