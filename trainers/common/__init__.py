"""What every trainer adapter shares: which env it serves (``env_config``), how a dataset row
names its task (``labels``), the per-episode numbers it logs (``logs``), and which framework
versions it supports (``versions``)."""
