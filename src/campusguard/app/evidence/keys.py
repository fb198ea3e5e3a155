"""The site's evidence key: one Ed25519 private key, made at first use, in a ``0600`` file.

It lives beside the event store (``<folder of storage.sqlite>/evidence-key.pem``, the folder of the
site's data), unencrypted like an SSH host key: whoever can read the data folder can read the
evidence anyway. Its public half goes into every bundle and is printed by
``campusguard evidence key CONFIG`` with its fingerprint, for recipients to pin.
"""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from campusguard.app.config.root import WatchConfig
from campusguard.errors import InvalidInputError

__all__ = ["KEY_NAME", "key_path", "load_or_create_key"]

KEY_NAME = "evidence-key.pem"


def key_path(config: WatchConfig) -> Path:
    """Where the site's evidence key is: ``evidence-key.pem`` in the folder of ``storage.sqlite``."""
    return Path(config.storage.sqlite).parent / KEY_NAME


def load_or_create_key(path: Path) -> Ed25519PrivateKey:
    """The evidence key in ``path``; made (and written ``0600``, never over an existing file) when missing.

    Raises:
        InvalidInputError: the file is not an unencrypted PEM Ed25519 private key, or cannot be written.
    """
    if not path.exists():
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: use theirs
            return load_or_create_key(path)
        except OSError as exc:
            raise InvalidInputError(f"cannot write the evidence key {path}: {exc.strerror}") from None
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
            fh.flush()
            os.fsync(fh.fileno())
        return key
    try:
        loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise InvalidInputError(
            f"evidence key {path} cannot be read as an unencrypted PEM private key: {exc}"
        ) from None
    if not isinstance(loaded, Ed25519PrivateKey):
        raise InvalidInputError(f"evidence key {path} is not an Ed25519 key")
    return loaded
