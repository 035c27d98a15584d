"""Opaque, tamper-evident page cursors for ``read-messages``.

A cursor names the exclusive upper end of the next (older) page, counted in messages
from the oldest one, because pages are anchored at the oldest message: appends never
move a position, so a walk concurrent with appends neither repeats nor skips.

The position alone would be forgeable and would work against any record, so every
cursor carries a keyed BLAKE2b tag over the position and a *scope*: the context id
plus a token identifying one generation of one record file (device, inode, a
fingerprint of its first line, and a counter the index bumps whenever it sees the
record rewritten or truncated). The key is random per :class:`CursorCodec`, so a
cursor is only good for the store that issued it, for the same record generation.

Layout: one version byte, eight bytes of position (big-endian), an 18-byte tag:
27 bytes, exactly 36 base64url characters with no padding. Every 4-character group
decodes one-to-one to 3 bytes, so there are no spare bits an alteration could hide
in: changing any character changes the decoded bytes and breaks the tag.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re

from murmur_nb._exceptions import ConversationReadError

__all__ = ["CURSOR_LENGTH", "CursorCodec"]

_VERSION = 1
_POSITION_BYTES = 8
_TAG_BYTES = 18
_RAW_BYTES = 1 + _POSITION_BYTES + _TAG_BYTES
CURSOR_LENGTH = _RAW_BYTES * 4 // 3
_PERSON = b"murmur-cursor"
_SHAPE = re.compile(rf"[A-Za-z0-9_-]{{{CURSOR_LENGTH}}}")


def _invalid() -> ConversationReadError:
    return ConversationReadError("invalid-cursor")


class CursorCodec:
    """Mint and check cursors with one secret key.

    Parameters
    ----------
    key
        Secret MAC key, at least 16 bytes. ``None`` draws 32 random bytes, so cursors
        from another codec (another store, another process) are refused.
    """

    __slots__ = ("_key",)

    def __init__(self, key: bytes | None = None) -> None:
        if key is None:
            key = os.urandom(32)
        if not isinstance(key, bytes) or not 16 <= len(key) <= 64:
            raise ValueError("a cursor key must be 16 to 64 bytes")
        self._key = key

    def _tag(self, head: bytes, scope: bytes) -> bytes:
        mac = hashlib.blake2b(head, digest_size=_TAG_BYTES, key=self._key, person=_PERSON)
        mac.update(scope)
        return mac.digest()

    def encode(self, position: int, scope: bytes) -> str:
        """Return the cursor text for ``position`` within ``scope``."""
        head = bytes((_VERSION,)) + position.to_bytes(_POSITION_BYTES, "big")
        raw = head + self._tag(head, scope)
        return base64.urlsafe_b64encode(raw).decode("ascii")

    def decode(self, cursor: object, scope: bytes) -> int:
        """Return the position a cursor names, or raise ``invalid-cursor``.

        Anything that is not a cursor this codec minted for ``scope`` - another type,
        another length, a character outside base64url, an altered byte, another
        record's cursor - raises :class:`~murmur_nb.ConversationReadError` with code
        ``invalid-cursor`` and never another exception.
        """
        if type(cursor) is not str or len(cursor) != CURSOR_LENGTH:
            raise _invalid()
        if _SHAPE.fullmatch(cursor) is None:
            raise _invalid()
        raw = base64.urlsafe_b64decode(cursor)
        head, tag = raw[: 1 + _POSITION_BYTES], raw[1 + _POSITION_BYTES :]
        if not hmac.compare_digest(tag, self._tag(head, scope)) or head[0] != _VERSION:
            raise _invalid()
        return int.from_bytes(head[1:], "big")
