"""An archive's optional encryption, with the ``cryptography`` library's AEAD (no crypto
of Kernel's own): AES-256-GCM over the archive in chunks, the STREAM construction (each
chunk's nonce is its number and whether it is the last, so chunks cannot be reordered,
dropped or the stream cut short unseen). The key comes from a passphrase (scrypt) or a
key file (HKDF-SHA256), with a random salt per archive: no two archives share a key, so
the counter nonces never repeat under one key.

A check value (HMAC of a fixed label under the key) in the archive's header tells a
wrong passphrase from a damaged archive before anything is decrypted.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from dataclasses import dataclass, field
from typing import Any, Protocol

CHUNK = 1 << 20  # plaintext bytes per sealed chunk
TAG = 16
SCRYPT = {"n": 1 << 15, "r": 8, "p": 1}  # ~32 MiB of memory, a fraction of a second
CHECK_LABEL = b"kernel-backup key check"


class Sink(Protocol):
    def write(self, data: bytes, /) -> int: ...


class Source(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class WrongKey(Exception):
    """The passphrase or key file is not the one the archive was made with."""


class Damaged(Exception):
    """A chunk does not authenticate: the archive was changed or cut short."""


@dataclass(frozen=True, slots=True)
class Protection:
    """What an archive is encrypted with: a passphrase or a key file's bytes."""

    kind: str  # "passphrase" or "key"
    material: bytes = field(repr=False)

    @classmethod
    def passphrase(cls, text: str) -> Protection:
        return cls("passphrase", text.strip("\r\n").encode("utf-8"))

    @classmethod
    def key_file(cls, data: bytes) -> Protection:
        return cls("key", data)


def new_header(protection: Protection) -> tuple[dict[str, Any], bytes]:
    """The header's ``encryption`` fields for a new archive, and its key."""
    salt = os.urandom(16)
    fields: dict[str, Any] = {"cipher": "AES-256-GCM-STREAM", "chunk": CHUNK, "salt": salt.hex()}
    if protection.kind == "passphrase":
        fields |= {"kdf": "scrypt", **SCRYPT}
    else:
        fields["kdf"] = "hkdf-sha256"
    key = derive(protection, fields)
    fields["check"] = _check(key)
    return fields, key


def key_for(protection: Protection, fields: dict[str, Any]) -> bytes:
    """The key of an archive whose header holds ``fields``; WrongKey if it is not."""
    if fields.get("kdf") != ("scrypt" if protection.kind == "passphrase" else "hkdf-sha256"):
        raise WrongKey(fields.get("kdf"))
    key = derive(protection, fields)
    if not hmac.compare_digest(_check(key), str(fields.get("check", ""))):
        raise WrongKey("check")
    return key


def derive(protection: Protection, fields: dict[str, Any]) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

    salt = bytes.fromhex(str(fields["salt"]))
    if fields["kdf"] == "scrypt":
        n, r, p = int(fields["n"]), int(fields["r"]), int(fields["p"])
        if not (1 << 10 <= n <= 1 << 20 and 1 <= r <= 32 and 1 <= p <= 16):
            raise WrongKey("scrypt parameters")
        return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(protection.material)
    info = b"kernel-backup key file"
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info).derive(
        protection.material
    )


def _check(key: bytes) -> str:
    return hmac.new(key, CHECK_LABEL, hashlib.sha256).hexdigest()


def _nonce(counter: int, last: bool) -> bytes:
    return struct.pack(">QI", counter, 1 if last else 0)


class SealingWriter:
    """A write-only file object: what is written is sealed chunk by chunk into ``out``
    (each chunk: its length, 4 bytes, then ciphertext and tag). ``close`` seals the last
    chunk (possibly empty) and does not close ``out``."""

    def __init__(self, out: Sink, key: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(key)
        self._out = out
        self._buffer = bytearray()
        self._counter = 0
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._buffer += data
        while len(self._buffer) > CHUNK:
            self._seal(bytes(self._buffer[:CHUNK]), last=False)
            del self._buffer[:CHUNK]
        return len(data)

    def _seal(self, chunk: bytes, last: bool) -> None:
        sealed = self._aead.encrypt(_nonce(self._counter, last), chunk, None)
        self._out.write(struct.pack(">I", len(sealed)) + sealed)
        self._counter += 1

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if not self.closed:
            self._seal(bytes(self._buffer), last=True)
            self._buffer.clear()
            self.closed = True


class OpeningReader:
    """A read-only file object over sealed chunks: each is authenticated before any of
    it is returned; Damaged if one is not, or if the stream ends before its last chunk
    or goes on after it."""

    def __init__(self, source: Source, key: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(key)
        self._source = source
        self._plain = b""
        self._at = 0
        self._counter = 0
        self._ended = False

    def read(self, size: int = -1) -> bytes:
        parts: list[bytes] = []
        wanted = size if size >= 0 else None
        while wanted is None or wanted > 0:
            if self._at >= len(self._plain) and (self._ended or not self._next()):
                break
            take = len(self._plain) - self._at if wanted is None else wanted
            piece = self._plain[self._at : self._at + take]
            self._at += len(piece)
            parts.append(piece)
            if wanted is not None:
                wanted -= len(piece)
        return b"".join(parts)

    def _next(self) -> bool:
        from cryptography.exceptions import InvalidTag

        head = self._source.read(4)
        if len(head) < 4:
            raise Damaged("cut short")
        (length,) = struct.unpack(">I", head)
        if not TAG <= length <= CHUNK + TAG:
            raise Damaged("chunk length")
        sealed = self._source.read(length)
        if len(sealed) < length:
            raise Damaged("cut short")
        plain = None
        for last in (False, True):
            try:
                plain = self._aead.decrypt(_nonce(self._counter, last), sealed, None)
            except InvalidTag:
                continue
            self._ended = last
            break
        if plain is None:
            raise Damaged("chunk")
        if self._ended and self._source.read(1):
            raise Damaged("data after the end")
        self._counter += 1
        self._plain, self._at = plain, 0
        return True
