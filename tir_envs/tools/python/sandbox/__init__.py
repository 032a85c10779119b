"""Code that runs *inside* the sandbox: the fork server (``zygote``), the namespace and limit
setup (``jail``), the interpreter loop (``interpreter``), output capture (``capture``) and the
wire format (``protocol``).

Everything here uses the standard library only and imports its siblings relatively, because the
package is started with ``python -I`` from a read-only copy of this directory where nothing
else of ``tir_envs`` (nor the project) is visible.
"""
