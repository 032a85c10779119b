"""How the host confines a sandbox session: per-session cgroups (``cgroups``), the seccomp
filter (``syscall_filter``), one uid per session (``uids``), and which of them this machine
grants (``protections``).  Host side; the sandbox's own setup is ``sandbox.jail``."""
