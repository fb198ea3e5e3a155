"""`campusguard evidence export|key|verify`: signed case bundles of incidents, checked offline.

``verify`` imports only `campusguard.app.evidence.bundle` (the standard library and
``cryptography``): a recipient runs it with the core install, no server, database or network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from campusguard.errors import InvalidInputError

evidence_app = typer.Typer(
    name="evidence",
    help="Signed evidence bundles: export incidents, print the site's key, verify a bundle.",
    no_args_is_help=True,
)


def users_audit(users_db: Path | None, config: Path | None = None) -> Any:
    """The audit reader of the console's identity, or ``None`` when there is none (or the console extra
    is missing: then the bundle has no audit entries). When ``config``'s storage is PostgreSQL it is
    the site's shared one there; else the users database ``--users-db`` (default: `serve`'s)."""
    from campusguard.cli.serve import default_users_db
    from campusguard.errors import MissingDependencyError

    storage = None
    if config is not None:
        from campusguard.app.config import load_config

        storage = load_config(config).config.storage
    if storage is None or not storage.postgresql:
        path = users_db or default_users_db()
        if not path.is_file():
            if users_db is not None:
                raise InvalidInputError(f"users database {users_db} does not exist")
            return None
    try:
        from campusguard.app.console.identity.store import open_identity_store

        return open_identity_store(storage, users_db=users_db, default_db=default_users_db())
    except MissingDependencyError as exc:
        typer.echo(f"note: the audit log is not exported: {exc}", err=True)
        return None


def _users_db_option() -> Any:
    return typer.Option(
        None,
        "--users-db",
        help="Users database with the audit log (default: serve's; with a PostgreSQL storage, the site's).",
    )


@evidence_app.command("export")
def export(
    config: Path = typer.Argument(..., help="The watch/serve config file."),
    event: list[str] = typer.Option([], "--event", help="An incident id (repeat for more)."),
    camera: str | None = typer.Option(None, "--camera", help="With --since/--until: every incident of this camera."),
    since: str | None = typer.Option(None, "--since", help="Incidents started at or after: ISO time or 8h, 2d ago."),
    until: str | None = typer.Option(None, "--until", help="Incidents started before: ISO time or a duration ago."),
    out: Path = typer.Option(..., "--out", help="The bundle to write (CASE.zip)."),
    reason: str | None = typer.Option(
        None, "--reason", help="Why the evidence is exported: who asked, what for (recorded and signed)."
    ),
    by: str | None = typer.Option(None, "--by", help="Who exports (default: cli:<login name>)."),
    users_db: Path | None = _users_db_option(),
) -> None:
    """Export incidents (by id, or a camera's over a time range) with their media, history, audit
    entries, config and camera facts into one signed ZIP; the incidents are kept (legal hold)."""
    from campusguard.app.evidence.case import CaseSource
    from campusguard.app.evidence.export import default_user, export_case
    from campusguard.app.evidence.keys import key_path, load_or_create_key
    from campusguard.cli.events import parse_since

    if bool(event) == (camera is not None or since is not None or until is not None):
        raise InvalidInputError("give either --event ID ... or --camera ID --since T --until T")
    if not event and (camera is None or since is None or until is None):
        raise InvalidInputError("without --event, give all of --camera ID --since T --until T")
    why = (reason or "").strip()
    if not why:
        typer.echo("note: no --reason given; the bundle and the audit log record the reason as not given", err=True)
        why = "not given"
    users = users_audit(users_db, config)
    source = CaseSource.from_config(config, audit=None if users is None else users.audit_about)
    try:
        lo = None if since is None else parse_since(since)
        hi = None if until is None else parse_since(until)
        records = source.select(event, camera=camera, since=lo, until=hi)
        key = load_or_create_key(key_path(source.loaded.config))
        user = by or default_user()
        selection = {"events": event} if event else {"camera": camera, "since": str(lo), "until": str(hi)}
        result = export_case(source, records, out, key=key, user=user, reason=why, selection=selection)
        if users is not None:
            users.audit_many(
                user,
                [
                    (
                        "evidence.export",
                        eid,
                        {"reason": why, "case": out.name, "manifest_sha256": result.manifest_sha256},
                    )
                    for eid in result.incidents
                ],
            )
    finally:
        source.close()
        if users is not None:
            users.close()
    typer.echo(
        f"exported {len(result.incidents)} incident(s), {result.files} files, {result.size:,} bytes to {out} "
        f"in {result.seconds:.2f} s; signed by {result.signer}; the incidents are kept (legal hold)"
    )


@evidence_app.command("key")
def key(config: Path = typer.Argument(..., help="The watch/serve config file.")) -> None:
    """Print the site's evidence public key (PEM) and its fingerprint; the key is made at first use."""
    from campusguard.app.config import load_config
    from campusguard.app.evidence.bundle import fingerprint, public_pem
    from campusguard.app.evidence.keys import key_path, load_or_create_key

    path = key_path(load_config(config).config)
    public = load_or_create_key(path).public_key()
    typer.echo(public_pem(public).decode(), nl=False)
    typer.echo(f"fingerprint: {fingerprint(public)}")
    typer.echo(f"private key: {path}", err=True)


EXIT_INTACT_UNPINNED = 3
"""`evidence verify`'s exit code for a bundle that is intact but whose signer was not pinned."""


@evidence_app.command("verify")
def verify(
    bundle: Path = typer.Argument(..., help="The evidence bundle (CASE.zip, or the folder it was extracted into)."),
    key: Path | None = typer.Option(None, "--key", help="The site's public key PEM, as you received it."),
    fingerprint: str | None = typer.Option(
        None, "--fingerprint", help="The site's key fingerprint (SHA256:...), as `campusguard evidence key` prints it."
    ),
) -> None:
    """Check a bundle's signature and every file. Exit 0: intact and signed by the pinned key
    (--key or --fingerprint); 3: intact, but no signer was pinned (compare the fingerprint shown
    with the one the site published); 1: a changed, missing or added file, or a bad or other signature."""
    from campusguard.app.evidence.bundle import parse_fingerprint, shown, verify_bundle

    pem = None
    if key is not None:
        try:
            with key.open("rb") as fh:
                pem = fh.read(64 * 1024)
        except OSError as exc:
            raise InvalidInputError(f"--key {shown(key)}: {exc.strerror}") from None
    pin = None if fingerprint is None else parse_fingerprint(fingerprint)
    check = verify_bundle(bundle, pem, key_name=shown(key), pin=pin)
    if not check.ok:
        for problem in check.problems:
            typer.echo(f"FAILED {problem}", err=True)
        typer.echo(f"{shown(bundle)}: NOT verified ({len(check.problems)} problem(s))", err=True)
        raise typer.Exit(1)
    typer.echo(check.summary())
    if not check.trusted:
        typer.echo(
            f"{shown(bundle)}: intact, signed by {check.signer}, signer not pinned: compare with the site's "
            "published fingerprint (campusguard evidence key), then pass --fingerprint or --key",
            err=True,
        )
        raise typer.Exit(EXIT_INTACT_UNPINNED)


def register(app: typer.Typer) -> None:
    app.add_typer(evidence_app)
