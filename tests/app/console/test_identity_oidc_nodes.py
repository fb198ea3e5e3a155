"""Campus sign-in (OIDC) over two console nodes sharing their identity in PostgreSQL.

A plain load balancer may send the provider's redirect back to another node than the one that
began the sign-in, and each later request to any node: the sign-in begun on node A comes back to
node B (the round trip's cookie sealed with the nodes' shared key), B's session works on A, A
re-checks it with the provider using the grant B kept, and when the provider drops the user the
session ends on both. The real OpenID Provider of `test_oidc_signin` (node), two real uvicorns.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes_console import CHEAP_HASHER, console_yaml, free_port
from test_oidc_signin import SECRET_ENV, oidc_section, start_provider

pytestmark = pytest.mark.slow
pytest.importorskip("psycopg")


@pytest.fixture
def two_nodes(console_video: Path, tmp_path: Path, postgres_url: str) -> Iterator[dict[str, Any]]:  # noqa: F811
    """A provider, and nodes A and B of one config (its storage: the PostgreSQL), each behind uvicorn.
    The console's public URL is A's: the provider sends every sign-in back there, and the test
    plays the load balancer that forwards the callback to B."""
    import uvicorn
    from fakes_watch import BlobDetector

    from campusguard.app.console.identity.store import open_identity_store
    from campusguard.app.console.runtime import ConsoleRuntime
    from campusguard.app.console.server import create_app

    ports = [free_port(), free_port()]
    urls = [f"http://127.0.0.1:{p}" for p in ports]
    provider = start_provider(urls[0])
    os.environ[SECRET_ENV] = "a-test-client-secret-of-some-length-0123456789"
    config = tmp_path / "site.yaml"
    text = console_yaml(console_video, tmp_path).replace("storage:\n", f"storage:\n  postgresql: '{postgres_url}'\n", 1)
    config.write_text(text + oidc_section(urls[0], provider.issuer))
    closers: list[Any] = []
    servers: list[Any] = []
    apps = []
    try:
        for port in ports:
            runtime = ConsoleRuntime(config, detector_factory=lambda *a: BlobDetector(), out=io.StringIO())
            closers.append(runtime.stop)
            users = open_identity_store(
                runtime.loaded.config.storage,
                users_db=None,
                default_db=tmp_path / "unused.db",
                password_hasher=CHEAP_HASHER,
            )
            closers.append(users.close)
            app = create_app(runtime, users_db=users)
            app.state.console.provider_sessions.recheck_s = 1.0
            server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
            thread = threading.Thread(target=server.run, daemon=True)
            thread.start()
            servers.append(server)
            deadline = time.monotonic() + 20
            while not server.started:
                assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
                time.sleep(0.05)
            apps.append(app)
        yield {"provider": provider, "urls": urls, "apps": apps}
    finally:
        for server in servers:
            server.should_exit = True
        for close in reversed(closers):
            close()
        os.environ.pop(SECRET_ENV, None)
        provider.process.kill()
        provider.process.wait(10)


def sign_in_across(a: str, b: str, login: str) -> str:
    """The round trip begun on node ``a``, its callback delivered to node ``b``; the session cookie."""
    with httpx.Client(timeout=15) as client:
        start = client.get(f"{a}/auth/oidc/login", params={"next": "/events"})
        assert start.status_code == 303 and "cg_oidc=" in start.headers["set-cookie"]
        form = client.get(start.headers["location"], follow_redirects=True)
        assert form.status_code == 200 and "/interaction/" in str(form.url), form.text
        step = client.post(f"{form.url}/login", data={"login": login})
        for _ in range(10):  # the provider's redirects, up to the one back to the console
            location = step.headers.get("location", "")
            if location.startswith(f"{a}/auth/oidc/callback?"):
                break
            assert step.status_code in (302, 303), step.text
            step = client.get(location)
        else:
            raise AssertionError("the provider never sent the browser back to the console")
        back = client.get(b + location[len(a) :])  # the load balancer picked node b
        assert back.status_code == 200, back.text
        session = client.cookies.get("cg_session", domain="127.0.0.1")
        assert session
        return session


def test_a_campus_sign_in_begun_on_one_node_ends_on_another_and_is_rechecked_everywhere(two_nodes) -> None:
    provider, (a, b) = two_nodes["provider"], two_nodes["urls"]
    provider.set_groups("alice", ["cg-operators"])
    session = sign_in_across(a, b, "alice")
    cookies = {"cg_session": session}
    me = httpx.get(f"{a}/api/v1/auth/me", cookies=cookies, timeout=15)
    assert me.status_code == 200 and me.json()["name"] == "alice" and me.json()["role"] == "operator"
    provider.set_groups("alice", ["cg-admins"])  # promoted at the provider
    time.sleep(1.2)
    assert httpx.get(f"{a}/api/v1/auth/me", cookies=cookies, timeout=15).json()["role"] == "admin"  # A re-checked
    assert httpx.get(f"{b}/api/v1/auth/me", cookies=cookies, timeout=15).json()["role"] == "admin"
    provider.set_groups("alice", ["staff"])  # no group maps any more
    time.sleep(1.2)
    gone = httpx.get(f"{b}/api/v1/auth/me", cookies=cookies, timeout=15)
    assert gone.status_code == 401 and "campus sign-in ended" in gone.text
    assert httpx.get(f"{a}/api/v1/auth/me", cookies=cookies, timeout=15).status_code == 401
    users = two_nodes["apps"][0].state.console.users
    actions = [e.action for e in users.audit_entries(user="alice")[0]]
    assert "logout.oidc" in actions and "role.oidc" in actions
