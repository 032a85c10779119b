"""Where the Python tool's interpreters run: ``base`` (the ``SandboxBackend`` interface),
``local`` (the local pool, the default), ``e2b`` and ``ray_backend``; ``registry`` makes one
from its name (``make_backend``)."""
