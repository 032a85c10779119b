"""The gateway's own handles on reasoning it returned: a signature, and a sealed copy.

Clients send reasoning back in places made for the vendor's opaque handles: an Anthropic
``thinking`` block's ``signature``, a Responses reasoning item's ``encrypted_content`` (Codex
replays only that).  The gateway fills them with its own: an HMAC of the text under a
per-process secret, so replayed reasoning can be told from forged or edited reasoning, and for
``encrypted_content`` the text itself with that HMAC, so a replay that carries nothing else
still renders the reasoning the policy sampled.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Any

#: the signing secret of this process's gateways (thinking signatures never leave a run)
_SECRET = secrets.token_bytes(32)


def sign(thinking: str) -> str:
    mac = hmac.new(_SECRET, thinking.encode(), hashlib.sha256).digest()
    return "tir-" + base64.urlsafe_b64encode(mac).decode().rstrip("=")


def signed(thinking: str, signature: Any) -> bool:
    return isinstance(signature, str) and hmac.compare_digest(signature, sign(thinking))


def sealed(text: str) -> str:
    """``encrypted_content`` of our reasoning items: the text and the gateway's HMAC of it."""
    return base64.urlsafe_b64encode(text.encode()).decode() + "." + sign(text)


def opened(handle: Any) -> str | None:
    """The text inside a handle ``sealed`` made, or ``None`` (not ours, or altered)."""
    if not isinstance(handle, str) or "." not in handle:
        return None
    body, _, mac = handle.partition(".")
    try:
        text = base64.urlsafe_b64decode(body.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    return text if signed(text, mac) else None
