"""`evidence verify` needs a trust anchor (issue 44): a bundle re-signed with another key never exits 0
without a pin and exits 1 with the site's key; an untouched one exits 3 without a pin, 0 with `--key`
or `--fingerprint`. What an attacker controls is read with limits, symlinks are refused and names are
printed escaped. The bundles are built here with the format's own `sign` (the verifier does not care who
built them); `tests/app/console/test_evidence_export.py` verifies real exports."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from campusguard.app.evidence.bundle import (
    FORMAT,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    PUBLIC_KEY,
    SIGNATURE,
    fingerprint,
    public_pem,
    sign,
    verify_bundle,
)
from campusguard.cli.main import main


def write_bundle(
    path: Path, key: Ed25519PrivateKey, files: dict[str, bytes], *, extra: dict[str, bytes] | None = None
) -> None:
    """A bundle of ``files`` signed by ``key`` (``extra``: entries left out of the manifest)."""
    listed = {PUBLIC_KEY: public_pem(key.public_key()), **files}
    manifest = {
        "format": FORMAT,
        "created_at": "2026-12-01T10:00:00Z",
        "created_by": "cli:ops",
        "reason": "police request",
        "signer": fingerprint(key.public_key()),
        "incidents": ["e1"],
        "files": [
            {"path": n, "sha256": hashlib.sha256(d).hexdigest(), "size": len(d)} for n, d in sorted(listed.items())
        ],
    }
    data = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    with zipfile.ZipFile(path, "w") as zf:
        for name, content in {**listed, **(extra or {})}.items():
            zf.writestr(name, content)
        zf.writestr(MANIFEST, data)
        zf.writestr(SIGNATURE, sign(key, data))


@pytest.fixture
def site(tmp_path: Path) -> tuple[Ed25519PrivateKey, Path, Path]:
    """The site's key, its public PEM as a recipient keeps it, and an untouched bundle."""
    key = Ed25519PrivateKey.generate()
    pem = tmp_path / "site.pem"
    pem.write_bytes(public_pem(key.public_key()))
    bundle = tmp_path / "CASE.zip"
    write_bundle(bundle, key, {"incidents/e1/incident.json": b'{"id": "e1"}', "incidents/e1/clip.mp4": b"\x00" * 500})
    return key, pem, bundle


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["evidence", "verify", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_evidence_verify_without_a_pin_never_exits_0_and_a_forged_bundle_fails_with_the_sites_key(
    site: tuple[Ed25519PrivateKey, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key, pem, bundle = site
    # the attacker changes the clip, rebuilds the manifest and signs it with a key of their own
    forged = tmp_path / "forged.zip"
    attacker = Ed25519PrivateKey.generate()
    write_bundle(
        forged, attacker, {"incidents/e1/incident.json": b'{"id": "e1"}', "incidents/e1/clip.mp4": b"\x01" * 500}
    )
    rc, out, err = verify(capsys, str(forged))
    assert rc == 3 and "signer not pinned" in err and fingerprint(attacker.public_key()) in err
    assert out.startswith("intact:") and "verified" not in out
    rc, _, err = verify(capsys, str(forged), "--key", str(pem))
    assert rc == 1 and f"not by {pem}" in err
    rc, _, err = verify(capsys, str(forged), "--fingerprint", fingerprint(key.public_key()))
    assert rc == 1 and "not by the pinned" in err


def test_evidence_verify_of_an_untouched_bundle_exits_3_unpinned_and_0_with_the_key_or_fingerprint(
    site: tuple[Ed25519PrivateKey, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key, pem, bundle = site
    rc, out, err = verify(capsys, str(bundle))
    assert rc == 3 and f"intact, signed by {fingerprint(key.public_key())}, signer not pinned" in err
    rc, out, _ = verify(capsys, str(bundle), "--key", str(pem))
    assert rc == 0 and out.startswith("verified: 1 incident(s)")
    rc, out, _ = verify(capsys, str(bundle), "--fingerprint", "SHA256:" + fingerprint(key.public_key())[7:].upper())
    assert rc == 0 and out.startswith("verified:")
    rc, _, err = verify(capsys, str(bundle), "--fingerprint", "SHA256:1234")
    assert rc == 2 and err.startswith("error: --fingerprint must be SHA256:") and len(err.splitlines()) == 1


def test_evidence_key_prints_the_fingerprint_verify_takes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "watch.yaml"
    config.write_text(f"cameras: []\nstorage:\n  sqlite: {tmp_path / 'events.db'}\n")
    assert main(["evidence", "key", str(config)]) == 0
    printed = capsys.readouterr().out
    line = next(x for x in printed.splitlines() if x.startswith("fingerprint: "))
    from campusguard.app.evidence.keys import load_or_create_key

    key = load_or_create_key(tmp_path / "evidence-key.pem")
    assert line == f"fingerprint: {fingerprint(key.public_key())}"
    bundle = tmp_path / "CASE.zip"
    write_bundle(bundle, key, {"report.html": b"<html></html>"})
    assert main(["evidence", "verify", str(bundle), "--fingerprint", line.split(": ", 1)[1]]) == 0


def test_evidence_verify_limits_the_manifest_before_parsing_it(
    site: tuple[Ed25519PrivateKey, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key, pem, _ = site
    huge = tmp_path / "huge.zip"
    with zipfile.ZipFile(huge, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(MANIFEST, b" " * (MAX_MANIFEST_BYTES + 1))  # a few KB compressed, 32 MiB parsed
        zf.writestr(SIGNATURE, b"x")
        zf.writestr(PUBLIC_KEY, public_pem(key.public_key()))
    check = verify_bundle(huge)
    assert not check.ok and any("more than" in p and MANIFEST in p for p in check.problems)
    big_sig = tmp_path / "bigsig.zip"
    write_bundle(big_sig, key, {"a.txt": b"a"})
    with zipfile.ZipFile(big_sig, "a") as zf:
        zf.writestr("manifest.sig.bak", b"")  # not in the manifest: added
    rc, _, err = verify(capsys, str(big_sig), "--key", str(pem))
    assert rc == 1 and "added: manifest.sig.bak" in err


def test_evidence_verify_refuses_symlinks_in_a_folder(
    site: tuple[Ed25519PrivateKey, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key, pem, bundle = site
    folder = tmp_path / "extracted"
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(folder)
    assert verify(capsys, str(folder), "--key", str(pem))[0] == 0
    secret = tmp_path / "outside.txt"
    secret.write_text("not part of the bundle")
    clip = folder / "incidents/e1/clip.mp4"
    content = clip.read_bytes()
    real = tmp_path / "clip.mp4"
    real.write_bytes(content)
    clip.unlink()
    clip.symlink_to(real)  # same bytes, but through a link: refused, not followed
    rc, _, err = verify(capsys, str(folder), "--key", str(pem))
    assert rc == 1 and "refused: incidents/e1/clip.mp4 is a symbolic link" in err


def test_evidence_verify_prints_entry_names_escaped(
    site: tuple[Ed25519PrivateKey, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key, pem, _ = site
    planted = tmp_path / "planted.zip"
    evil = "incidents/\x1b]0;pwned\x07\x1b[2Jx.txt"
    write_bundle(planted, key, {"a.txt": b"a"}, extra={evil: b"planted"})
    rc, out, err = verify(capsys, str(planted), "--key", str(pem))
    assert rc == 1 and "\x1b" not in err + out and "\x07" not in err
    assert "added: incidents/\\x1b]0;pwned\\x07\\x1b[2Jx.txt (not in the manifest)" in err
