"""Encryption at rest of a task snapshot's secrets: AES-256-GCM, key derived (HKDF-SHA256)
from ``SECRET_KEY``; ``SECRET_KEY_FALLBACKS`` still open, so keys rotate the Django way."""

from __future__ import annotations

import base64
import functools
import json
import os
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

_VERSION = b"m1"
_INFO = b"mcp_tasks.snapshot.v1"


class SnapshotDecryptionError(Exception):
    """The sealed secrets cannot be opened with SECRET_KEY or any SECRET_KEY_FALLBACKS."""


@functools.lru_cache(maxsize=16)
def _cipher(secret: str | bytes) -> AESGCM:
    """The AES-GCM cipher of the key derived from ``secret`` (made once per secret)."""
    raw = secret.encode() if isinstance(secret, str) else secret
    return AESGCM(HKDF(algorithm=SHA256(), length=32, salt=None, info=_INFO).derive(raw))


def seal(value: Any) -> str:
    """Encrypt a JSON-serialisable value with the current ``SECRET_KEY``."""
    nonce = os.urandom(12)
    plaintext = json.dumps(value, separators=(",", ":")).encode()
    ciphertext = _cipher(settings.SECRET_KEY).encrypt(nonce, plaintext, _VERSION)
    return (_VERSION + b"." + base64.urlsafe_b64encode(nonce + ciphertext)).decode()


def unseal(token: str) -> Any:
    """Decrypt :func:`seal` output; raises :class:`SnapshotDecryptionError`."""
    if not token:
        return None
    version, _, body = token.encode().partition(b".")
    if version != _VERSION:
        raise SnapshotDecryptionError("unknown snapshot format")
    try:
        data = base64.b64decode(body, altchars=b"-_", validate=True)
    except ValueError as exc:
        raise SnapshotDecryptionError("the task's context snapshot is corrupt") from exc
    if len(data) < 12 + 16:  # nonce + GCM tag
        raise SnapshotDecryptionError("the task's context snapshot is corrupt")
    nonce, ciphertext = data[:12], data[12:]
    for secret in [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]:
        try:
            return json.loads(_cipher(secret).decrypt(nonce, ciphertext, _VERSION))
        except InvalidTag:
            continue
    raise SnapshotDecryptionError(
        "the task's context snapshot cannot be decrypted: SECRET_KEY changed and the old key "
        "is not in SECRET_KEY_FALLBACKS"
    )
