"""Helpers the self-play tests share."""

from __future__ import annotations


def merged(base: dict, kw: dict) -> dict:
    """``base`` with ``kw`` on top, a settings group (a dict) merged key by key."""
    out = dict(base)
    for k, v in kw.items():
        out[k] = {**out[k], **v} if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out
