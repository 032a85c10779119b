"""Why an isolation mode could not start, in words a user can act on: the cause and the fix.

``isolation="auto"`` falls back to a weaker mode when a stronger one fails (``launcher``).  A
fallback that says only "unavailable" plus a stderr line leaves the user to guess whether the
kernel, the container or the way Python was started is to blame; ``explain`` matches the
failure against the known causes and names the fix for each.  What no rule knows is passed on
as it is, with the general fix.
"""

from __future__ import annotations

import re

#: (pattern over the failure's text, cause, fix); first match wins
_CAUSES: tuple[tuple[str, str, str], ...] = (
    (r"bubblewrap \(bwrap\) is not installed",
     "bubblewrap is not installed",
     "install it (apt-get install bubblewrap, dnf install bubblewrap)"),
    (r"execvp?\b.*No such file or directory|can't (?:exec|find)|No such file or directory.*python",
     "the Python interpreter's path does not exist inside the sandbox (started through a path "
     "the sandbox does not bind)",
     "start Python by its absolute path (the launcher resolves symlinks and '..'; report this "
     "with the interpreter's path if it persists)"),
    (r"apparmor|restrict_unprivileged_userns",
     "AppArmor forbids unprivileged user namespaces (Ubuntu 23.10 and later)",
     "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile that "
     "allows userns for bwrap"),
    (r"No permissions to creat\w* new namespace|setting up uid map|uid_map|"
     r"Creating new namespace failed|unshare.*(?:Operation not permitted|EPERM)|"
     r"Operation not permitted.*(?:namespace|unshare)|CLONE_NEWUSER",
     "the kernel or container refuses new user namespaces",
     "allow unprivileged user namespaces (sysctl -w kernel.unprivileged_userns_clone=1; "
     "user.max_user_namespaces > 0), or in Docker run with --security-opt seccomp=unconfined "
     "(and --security-opt apparmor=unconfined)"),
    (r"(?:Can't mount|mount).*proc|proc.*(?:Permission denied|Operation not permitted)",
     "the container does not allow mounting a new /proc",
     "run the container with --security-opt systempaths=unconfined (or --privileged)"),
    (r"pivot_root|mount.*(?:Permission denied|Operation not permitted)",
     "the container does not allow the mounts the sandbox builds its filesystem with",
     "run the container with --cap-add SYS_ADMIN --security-opt seccomp=unconfined"),
    (r"did not start within",
     "the fork server was too slow to start (an overloaded machine, or a slow import in the "
     "preload list)",
     "raise start_timeout_s, or trim preload"),
)
GENERAL_FIX = ("see docs/sandbox.md (isolation modes); isolation='bwrap' or 'unshare' makes "
               "this mode's failure an error instead of a fallback")


def explain(mode: str, detail: str) -> str:
    """``"cause: ...; fix: ...; detail: ..."`` for a failure of ``mode`` to start."""
    for pattern, cause, fix in _CAUSES:
        if re.search(pattern, detail, re.IGNORECASE | re.DOTALL):
            return f"{mode}: cause: {cause}; fix: {fix}; detail: {detail.strip()[-500:]}"
    return f"{mode}: cause: {detail.strip()[-500:] or 'unknown'}; fix: {GENERAL_FIX}"
