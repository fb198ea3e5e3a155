"""`campusguard serve CONFIG` (the operators' console), `campusguard users ...`, and `demo --serve`.

The console needs the ``console`` extra; it is imported only when one of these commands runs.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import shlex
import socket
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from campusguard.app.infra.private import private_files
from campusguard.cli.logs import apply_log_level, log_level_option, quiet_decoder_logs, repair_option
from campusguard.errors import InvalidInputError, require

DEFAULT_USERS_DB = "campusguard-users.db"
USERS_DB_ENV = "CAMPUSGUARD_USERS_DB"
TLS_HINT = (
    "the console speaks plain HTTP: put a TLS reverse proxy in front of it (see docs/console.md, e.g. Caddy:\n"
    "  caddy reverse-proxy --from console.example.edu --to 127.0.0.1:8080)\n"
    "and serve it on 127.0.0.1 with --trusted-proxy 127.0.0.1, or pass --secure-cookies once TLS terminates "
    "in front of this port"
)

users_app = typer.Typer(name="users", help="Console users: add, list, remove, API tokens.", no_args_is_help=True)


def default_users_db() -> Path:
    """``$CAMPUSGUARD_USERS_DB`` or ``campusguard-users.db`` in the current folder."""
    return Path(os.environ.get(USERS_DB_ENV) or DEFAULT_USERS_DB)


def _users_db_option() -> Any:
    return typer.Option(None, "--users-db", help=f"Users database (default: ${USERS_DB_ENV} or ./{DEFAULT_USERS_DB}).")


def _config_option() -> Any:
    return typer.Option(
        None,
        "--config",
        help="The site's watch/serve config: when its storage is PostgreSQL, the users are there "
        "(shared by every console node; --users-db does not apply).",
    )


def _open_users(path: Path | None, storage: Any = None, *, config: Path | None = None) -> Any:
    """The console's identity store: the PostgreSQL of ``storage`` (or of ``config``'s storage) when it
    names one, else the SQLite file ``path`` (default `default_users_db`)."""
    require("argon2", "console")
    from campusguard.app.console.identity.store import open_identity_store

    if storage is None and config is not None:
        from campusguard.app.config import load_config

        storage = load_config(config).config.storage
    return open_identity_store(storage, users_db=path, default_db=default_users_db())


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, port: int, allow_remote: bool) -> None:
    """Refuse a non-loopback address without ``--allow-remote``, and a port already in use, in one line each."""
    if not is_loopback(host) and not allow_remote:
        raise InvalidInputError(
            f"--host {host} would expose the console beyond this machine; pass --allow-remote as well, "
            "and put a TLS reverse proxy in front (docs/console.md)"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise InvalidInputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def read_password(password_stdin: bool) -> str:
    """The new password: one line from stdin with ``--password-stdin``, else a hidden prompt typed twice."""
    if password_stdin:
        line = sys.stdin.readline()
        return line[:-1] if line.endswith("\n") else line
    return str(typer.prompt("Password", hide_input=True, confirmation_prompt=True))


def uvicorn_options(log_level: str = "warning") -> dict[str, Any]:
    """The options (besides app, host and port) the console is served with by uvicorn.

    uvicorn's own proxy-header handling is off: it would believe ``X-Forwarded-For`` from
    127.0.0.1, so any local process could pick its address. The app reads the header itself, only
    from the proxies named by ``--trusted-proxy`` (`campusguard.app.console.identity.auth.client_address`).
    """
    return {"log_level": log_level, "proxy_headers": False, "server_header": False}


@private_files
def serve_console(
    config: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    users_db: Path | None = None,
    allow_remote: bool = False,
    secure_cookies: bool = False,
    trusted_proxies: list[str] | None = None,
    log_level: str = "warning",
    detector_factory: Any = None,
    banner: str | None = None,
    ray_address: str | None = None,
    repair: bool = False,
    node: str | None = None,
    advertise_url: str | None = None,
) -> None:
    """Start the pipeline of ``config`` and the console on ``host:port``; return when stopped.

    SIGTERM and SIGINT stop it as they stop ``watch`` (`campusguard.app.signals.run_until_stopped`:
    open incidents ended, recordings finished, sinks flushed, within the config's
    ``service.stop_timeout_s``; a second signal exits at once); with systemd it notifies READY,
    WATCHDOG and STOPPING. Raises ``typer.Exit(1)`` when the stop was not clean.

    Files and folders it creates are private (``0600``/``0700``, `private_files`).
    ``trusted_proxies``: reverse proxies whose ``X-Forwarded-For`` is believed (none by default).
    ``ray_address``: the cameras run in groups on that Ray cluster (`campusguard.app.cluster`).
    ``repair``: set an empty or damaged store file aside and begin a new one (`check_storage_files`).
    ``node``: run as this node of the site (``storage.postgresql`` needed; ``""``: the host name's
    first label), sharing the cameras with the other nodes (`campusguard.app.nodes`); ``advertise_url``:
    the URL the other nodes reach this console at (default ``http://HOST:PORT``)."""
    require("uvicorn", "console")
    require("fastapi", "console")
    from campusguard.app.console.identity.auth import parse_trusted_proxies
    from campusguard.app.console.runtime import ConsoleRuntime
    from campusguard.app.console.server import create_app

    proxies = [str(net) for net in parse_trusted_proxies(trusted_proxies or [])]  # a bad one: before anything starts
    check_bind(host, port, allow_remote)
    if not is_loopback(host):
        print(f"warning: listening on {host}; {TLS_HINT}", file=sys.stderr)
    from campusguard.app.config import load_config
    from campusguard.app.engine.wiring import check_storage_files

    loaded = load_config(config)
    check_storage_files(loaded, repair=repair)  # bad config, empty or damaged store: one line
    node = node_name(node, loaded.config.storage.postgresql, ray_address)
    runtime = ConsoleRuntime(
        config,
        detector_factory=detector_factory,
        ray_address=ray_address,
        node=node,
        node_url=None if node is None else (advertise_url or f"http://{_url_host(host)}:{port}"),
    )
    from campusguard.app.model_warning import warn_for_config

    warn_for_config(runtime.loaded.config)
    try:
        users = _open_users(users_db, runtime.loaded.config.storage)
    except BaseException:
        runtime.stop()
        raise
    from campusguard.app.console.uvicorn_runner import ConsoleService
    from campusguard.app.signals import run_until_stopped

    clean = False
    try:
        app = create_app(runtime, users_db=users, secure_cookies=secure_cookies, trusted_proxies=proxies)
        service = ConsoleService(runtime, app, host=host, port=port, options=uvicorn_options(log_level))
        shown = f"[{host}]" if ":" in host else host

        def announce() -> None:
            site = "" if node is None else f"node {node} of the site, "
            print(f"CampusGuard console on http://{shown}:{port}/ ({site}users: {users.display}; Ctrl-C stops)", flush=True)
            if banner:
                print(banner, flush=True)
            if not users.list_users():
                where = (
                    f"--config {shlex.quote(str(config))}"
                    if runtime.loaded.config.storage.postgresql
                    else f"--users-db {shlex.quote(users.display)}"
                )
                print(f"no users yet: add an admin with `campusguard users add NAME --role admin {where}`", flush=True)
            if proxies:
                print(f"X-Forwarded-For is believed from {', '.join(proxies)} only", flush=True)

        service.on_started = announce
        clean = run_until_stopped(
            service,
            stop_timeout_s=runtime.loaded.config.service.stop_timeout_s,
            ready_status=f"console on http://{shown}:{port}/",
        )
    finally:
        runtime.stop()
        users.close()
    if not clean:
        raise typer.Exit(1)


_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def node_name(node: str | None, postgresql: str | None, ray_address: str | None) -> str | None:
    """The node this `serve` is (None: a single box, as without PostgreSQL).

    Raises:
        InvalidInputError: ``--node`` without ``storage.postgresql``, with ``--ray``, or not a name.
    """
    if node is None:
        return None
    if postgresql is None:
        raise InvalidInputError(
            "--node needs the site's PostgreSQL store: nodes share their cameras through it "
            "(storage: {postgresql: postgresql://user@host/db}); with SQLite, serve runs on one box"
        )
    if ray_address is not None:
        raise InvalidInputError("--node and --ray do not go together: nodes run their cameras themselves (docs/cluster.md)")
    name = socket.gethostname().split(".")[0] if node == "" else node
    if not _NODE_NAME.match(name):
        raise InvalidInputError(f"--node {name!r} is not a node name (letters, digits, _ . -; at most 63)")
    return name


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::"):
        return socket.gethostname()
    return f"[{host}]" if ":" in host else host


def demo_admin(users_db: Path) -> str:
    """Make sure the demo's users database has an admin; a one-line note of how to log in."""
    with _open_users(users_db) as users:
        if any(u.role == "admin" for u in users.list_users()):
            admin = next(u.name for u in users.list_users() if u.role == "admin")
            return (
                f"[demo] log in with an existing admin of {users_db}; forgot the password? "
                f"`campusguard users passwd {shlex.quote(admin)} --users-db {shlex.quote(str(users_db))}` sets a new one"
            )
        password = secrets.token_urlsafe(12)
        users.add_user("admin", "admin", password)
        users.audit(None, "user.add", "admin", role="admin", via="demo")
    return f"[demo] log in as admin with the one-time password {password} (stored hashed in {users_db})"


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        config: Path = typer.Argument(..., help="Watch configuration YAML (as for `campusguard watch`)."),
        host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (loopback by default)."),
        port: int = typer.Option(8080, "--port", min=1, max=65535, help="TCP port."),
        users_db: Path = _users_db_option(),
        allow_remote: bool = typer.Option(
            False, "--allow-remote", help="Allow a non-loopback --host (put a TLS reverse proxy in front)."
        ),
        secure_cookies: bool = typer.Option(
            False, "--secure-cookies", help="Mark cookies Secure (when TLS terminates in front of the console)."
        ),
        trusted_proxy: list[str] = typer.Option(
            [],
            "--trusted-proxy",
            metavar="ADDR[,ADDR...]",
            help="Reverse proxies (addresses or networks) whose X-Forwarded-For names the client; repeatable. "
            "Default: none, not even 127.0.0.1 (the header is ignored).",
        ),
        log_level: str | None = log_level_option(),
        ray: str | None = typer.Option(
            None,
            "--ray",
            metavar="auto|ADDRESS",
            help="Run the cameras in groups on Ray actors of this cluster; live view, incident media and "
            "zone edits go through the actors (docs/cluster.md). Needs the ray extra.",
        ),
        repair: bool = repair_option(),
        node: str | None = typer.Option(
            None,
            "--node",
            metavar="NAME",
            help="Run as this node of the site: nodes started on the same config and database share the cameras "
            "and take over a dead node's (docs/cluster.md). Needs storage.postgresql. --node '' names the node "
            "after the host.",
        ),
        advertise_url: str | None = typer.Option(
            None,
            "--advertise-url",
            metavar="URL",
            help="With nodes: the URL the other nodes reach this console at, for live views (default http://HOST:PORT).",
        ),
    ) -> None:
        """Run the watch pipeline and the operators' console (HTTP API and pages) in one process."""
        apply_log_level(log_level)
        quiet_decoder_logs()
        serve_console(
            config,
            host=host,
            port=port,
            users_db=users_db,
            allow_remote=allow_remote,
            secure_cookies=secure_cookies,
            trusted_proxies=trusted_proxy,
            log_level=log_level or "warning",
            ray_address=ray,
            repair=repair,
            node=node,
            advertise_url=advertise_url,
        )

    @users_app.command("add")
    def users_add(
        name: str = typer.Argument(..., help="User name (letters, digits, _ . @ -)."),
        role: str = typer.Option(..., "--role", help="admin, operator or viewer."),
        password_stdin: bool = typer.Option(
            False, "--password-stdin", help="Read the password from the first line of stdin instead of a prompt."
        ),
        users_db: Path = _users_db_option(),
        config: Path | None = _config_option(),
    ) -> None:
        """Add a console user (the password is asked for, never taken from the command line)."""
        from campusguard.app.console.identity.users import ROLES, check_password, check_user_name

        check_user_name(name)
        if role not in ROLES:
            raise InvalidInputError(f"--role must be one of {', '.join(ROLES)}, got {role!r}")
        with _open_users(users_db, config=config) as users:
            if users.get_user(name) is not None:
                raise InvalidInputError(f"user {name!r} already exists in {users.display}")
            password = check_password(read_password(password_stdin))
            users.add_user(name, role, password)
            users.audit(None, "user.add", name, role=role, via="cli")
            typer.echo(f"added {role} {name!r} to {users.display}")

    @users_app.command("list")
    def users_list(users_db: Path = _users_db_option(), config: Path | None = _config_option()) -> None:
        """List console users and their roles."""
        with _open_users(users_db, config=config) as users:
            found = users.list_users()
            table = Table(title=f"{len(found)} users in {users.display}")
            for col in ("name", "role", "created (UTC)"):
                table.add_column(col)
            for u in found:
                table.add_row(u.name, u.role, u.created_at[:19].replace("T", " "))
        Console(width=120).print(table)

    @users_app.command("remove")
    def users_remove(
        name: str = typer.Argument(..., help="User name."),
        users_db: Path = _users_db_option(),
        config: Path | None = _config_option(),
    ) -> None:
        """Remove a console user and all their sessions and API tokens."""
        with _open_users(users_db, config=config) as users:
            try:
                users.remove_user(name)
            except KeyError:
                raise InvalidInputError(f"no user {name!r} in {users.display}") from None
            users.audit(None, "user.remove", name, via="cli")
            typer.echo(f"removed {name!r} from {users.display}")

    @users_app.command("passwd")
    def users_passwd(
        name: str = typer.Argument(..., help="User name."),
        password_stdin: bool = typer.Option(
            False, "--password-stdin", help="Read the new password from the first line of stdin instead of a prompt."
        ),
        users_db: Path = _users_db_option(),
        config: Path | None = _config_option(),
    ) -> None:
        """Set a user's password (asked for, never on the command line); their login sessions end."""
        from campusguard.app.console.identity.users import check_password

        with _open_users(users_db, config=config) as users:
            if users.get_user(name) is None:
                raise InvalidInputError(f"no user {name!r} in {users.display}")
            users.set_password(name, check_password(read_password(password_stdin)))
            users.audit(None, "user.update", name, password_changed=True, via="cli")
            typer.echo(f"password of {name!r} changed; their sessions ended")

    @users_app.command("token")
    def users_token(
        name: str = typer.Argument(..., help="User name whose rights the token carries."),
        label: str = typer.Option(None, "--label", help="What the token is for."),
        days: int = typer.Option(365, "--days", min=1, max=3650, help="Days until it expires."),
        users_db: Path = _users_db_option(),
        config: Path | None = _config_option(),
    ) -> None:
        """Create an API token (Authorization: Bearer ...) for a user; it is printed once, only its hash is kept."""
        from datetime import timedelta

        with _open_users(users_db, config=config) as users:
            try:
                token = users.create_api_token(name, label=label, ttl=timedelta(days=days))
            except KeyError:
                raise InvalidInputError(f"no user {name!r} in {users.display}") from None
            users.audit(None, "token.create", name, label=label, days=days, via="cli")
        typer.echo(token)
        print(f"API token for {name!r}, valid {days} days; it is not shown again.", file=sys.stderr)

    @users_app.command("tokens")
    def users_tokens(
        name: str | None = typer.Argument(None, help="Only this user's tokens."),
        users_db: Path = _users_db_option(),
        config: Path | None = _config_option(),
    ) -> None:
        """List the valid API tokens: id, user, label, created, expires (never the token itself)."""
        with _open_users(users_db, config=config) as users:
            for t in users.api_tokens(name):
                typer.echo(f"{t.id}  {t.user}  {t.label or '-'}  created {t.created_at}  expires {t.expires_at}")

    @users_app.command("revoke-token")
    def users_revoke_token(
        token_id: str = typer.Argument(..., help="The token's id, as `users tokens` lists it."),
        users_db: Path = _users_db_option(),
        config: Path | None = _config_option(),
    ) -> None:
        """Revoke an API token: it stops working at once (a running console sees it at the next request)."""
        with _open_users(users_db, config=config) as users:
            revoked = users.revoke_api_token(token_id)
            if revoked is None:
                raise InvalidInputError(f"no API token {token_id!r} in {users.display} (see `campusguard users tokens`)")
            users.audit(None, "token.revoke", revoked.user, token=token_id, label=revoked.label, via="cli")
        typer.echo(f"revoked API token {token_id} of {revoked.user!r}")

    app.add_typer(users_app)


__all__ = ["register", "serve_console", "uvicorn_options", "check_bind", "is_loopback", "demo_admin"]
