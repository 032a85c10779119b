"""The date a family's system preamble states, as its template states it, pinnable per run.

Llama 3.2's and gpt-oss's templates write today's date (``strftime_now``); Llama 3.1's writes
its ``date_string`` default ("26 Jul 2024").  A run that must be reproducible pins one date
for every prompt with ``TIR_CHAT_DATE=YYYY-MM-DD`` (the env variable, read when a renderer
is built).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from typing import Any

#: Llama 3.1's template default (and the one a template without a chat_template gets)
LLAMA_DEFAULT = dt.date(2024, 7, 26)
ENV = "TIR_CHAT_DATE"


def pinned_date() -> dt.date | None:
    """The run's pinned date (``TIR_CHAT_DATE``), or ``None``."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{ENV}={value!r} is not a date: write it as YYYY-MM-DD "
                         "(e.g. 2024-07-26)") from None


def template_date(tokenizer: Any, default: dt.date | None) -> dt.date:
    """The date the tokenizer's chat template would write now: the run's pin; else today
    where the template calls ``strftime_now`` (or ``default`` is ``None``); else the
    template's own ``date_string`` default; else ``default``."""
    pinned = pinned_date()
    if pinned is not None:
        return pinned
    template = str(getattr(tokenizer, "chat_template", None) or "")
    if "strftime_now" in template or default is None:
        return dt.date.today()
    literal = re.search(r'date_string\s*=\s*"(\d{1,2} \w{3} \d{4})"', template)
    if literal:
        return dt.datetime.strptime(literal.group(1), "%d %b %Y").date()
    return default
