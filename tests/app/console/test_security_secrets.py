"""Issue 44 on the console: a zone name with a line break is a 422 naming the field, the public /readyz
names no camera and no host, viewers' /metrics show no volume paths, Secure cookies and HSTS follow an https
public_url, admin API tokens can be listed and revoked, and login.js follows the server's safe_next rule."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from fakes_console import console_yaml, make_console, put_zones

from campusguard.app.console.identity.auth import CSRF_HEADER
from campusguard.app.console.identity.oidc import safe_next
from campusguard.app.infra.diskspace import disk_health

STATIC_JS = Path(__file__).parents[3] / "src/campusguard/app/console/static/js"


def test_a_zone_name_with_a_line_break_is_a_422_naming_the_field(console) -> None:
    client = console.client()
    h = console.bearer("ada")
    before = console.config.read_text()
    body = {"zones": [{"name": "Gate\r\nBcc: x@example.org", "polygon": [[0, 0], [100, 0], [100, 100]]}], "lines": []}
    r = put_zones(client, "cam1", body, h)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["loc"][-3:] == ["zones", 0, "name"] and "control characters" in detail["msg"]
    assert "Bcc" not in r.text  # the input is never echoed back
    rule = {"kind": "intrusion", "name": "alarm\u202e", "zone": "east"}
    r = put_zones(client, "cam1", {"zones": [], "lines": [], "rules": [rule]}, h)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "name"
    assert console.config.read_text() == before


def test_a_config_with_a_crlf_name_exits_2_at_start_with_one_line(tmp_path: Path, console_video: Path, capsys) -> None:
    from campusguard.cli.main import main

    for what, old, new in (
        ("zone", "      - name: east\n", '      - name: "Gate\\r\\nBcc: x@example.org"\n'),
        ("rule", "      - kind: intrusion\n", '      - kind: intrusion\n        name: "alarm\\nX"\n'),
    ):
        config = tmp_path / f"{what}.yaml"
        config.write_text(console_yaml(console_video, tmp_path).replace(old, new, 1))
        assert main(["watch", str(config)]) == 2, what
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "must be plain text without control characters" in err, err


def test_the_public_readyz_names_no_camera_and_no_host(console) -> None:
    public = console.client().get("/readyz")
    assert public.status_code == 503 and public.json() == {"ready": False}
    assert "cam1" not in public.text and "127.0.0.1" not in public.text
    signed_in = console.client().get("/readyz", headers=console.bearer("vera")).json()
    assert signed_in["cameras_down"] == {"cam1": "starting"} or "cam1" in signed_in["cameras_down"]


def test_metrics_show_viewers_no_volume_paths(console, tmp_path: Path) -> None:
    console.runtime.start()  # the metrics of a running pipeline
    health = disk_health()
    full = tmp_path / "media-volume" / "x.jpg"
    health.failed("snapshot", full, OSError(28, "No space left on device"))
    try:
        viewer = console.client().get("/metrics", headers=console.bearer("vera")).text
        operator = console.client().get("/metrics", headers=console.bearer("otto")).text
    finally:
        health.ok(full)
    assert 'campusguard_disk_full{volume="volume-1"} 1.0' in viewer and "/" not in _disk_lines(viewer)
    assert any("/" in line for line in _disk_lines(operator))


def _disk_lines(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if line.startswith("campusguard_disk_full{"))


def test_secure_cookies_and_hsts_when_public_url_is_https(console_video: Path, tmp_path: Path) -> None:
    config = tmp_path / "watch.yaml"
    config.write_text(
        console_yaml(console_video, tmp_path) + "console:\n  public_url: https://cameras.campus.example\n"
    )
    c = make_console(config, tmp_path)
    try:
        r = c.client().post("/api/v1/auth/login", json={"username": "vera", "password": "viewer-pass-1"})
        assert r.status_code == 200
        cookies = r.headers.get_list("set-cookie")
        assert cookies and all("secure" in v.lower() for v in cookies)
        assert r.headers["strict-transport-security"].startswith("max-age=")
        assert "strict-transport-security" in c.client().get("/healthz").headers
    finally:
        c.runtime.stop()
        c.users.close()


def test_plain_http_console_sends_no_hsts(console) -> None:
    assert "strict-transport-security" not in console.client().get("/healthz").headers


def test_admin_made_api_tokens_can_be_listed_and_revoked(console) -> None:
    client = console.client()
    admin = console.bearer("ada")
    made = client.post("/api/v1/users/otto/tokens", json={"label": "nvr", "days": 30}, headers=admin)
    token = made.json()["token"]
    assert client.get("/api/v1/cameras", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    listed = client.get("/api/v1/tokens", headers=admin).json()
    mine = [t for t in listed if t["label"] == "nvr"]
    assert len(mine) == 1 and mine[0]["user"] == "otto" and token not in json.dumps(listed)
    assert client.get("/api/v1/tokens", headers=console.bearer("otto")).status_code == 403
    assert client.delete(f"/api/v1/tokens/{mine[0]['id']}", headers=admin).status_code == 204
    assert client.get("/api/v1/cameras", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    assert client.delete(f"/api/v1/tokens/{mine[0]['id']}", headers=admin).status_code == 404
    assert console.users.audit_entries(action="token.revoke", limit=1)[0][0].target == "otto"


def test_users_cli_lists_and_revokes_tokens(tmp_path: Path, capsys) -> None:
    from campusguard.app.console.identity.users import UserStore
    from campusguard.cli.main import main

    db = tmp_path / "users.db"
    with UserStore(db) as users:
        users.add_user("ada", "admin", "admin-pass-1")
        token = users.create_api_token("ada", label="grafana")
    assert main(["users", "tokens", "--users-db", str(db)]) == 0
    line = capsys.readouterr().out.strip()
    token_id = line.split()[0]
    assert "grafana" in line and token not in line and len(token_id) == 16
    assert main(["users", "revoke-token", token_id, "--users-db", str(db)]) == 0
    with UserStore(db) as users:
        assert users.resolve(token) is None
    assert main(["users", "revoke-token", token_id, "--users-db", str(db)]) == 2


NEXTS = [
    "/events?camera=cam1",
    "/%09/evil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    "//evil.example",
    "/\\evil.example",
    "https://evil.example/",
    "/login?next=/x",
    "/auth/oidc/login",
    "/zones/cam1#top",
    "",
    "events",
    "/\x7f/x",
]


def test_login_js_follows_only_same_origin_paths_like_safe_next() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    # what the browser hands to safeNext: the query parameter as URLSearchParams decodes it
    from urllib.parse import unquote

    decoded = [unquote(n) for n in NEXTS]
    script = (
        f"import {{ safeNext }} from {json.dumps((STATIC_JS / 'safe_next.js').as_uri())};\n"
        f"const cases = {json.dumps(decoded)};\n"
        "console.log(JSON.stringify(cases.map((n) => safeNext(n, 'https://cameras.campus.example'))));\n"
    )
    done = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    client = json.loads(done.stdout)
    server = [safe_next(n) for n in decoded]
    for n, c, s in zip(decoded, client, server, strict=True):
        assert c == "/" if s == "/" else c.startswith("/") and not c.startswith("//"), (n, c, s)
        assert (c == "/") == (s == "/"), (n, c, s)  # the same rule: both refuse or both follow
    assert client[1] == "/" and client[0] == "/events?camera=cam1" and client[9] == "/zones/cam1#top"


def test_a_cookie_write_still_needs_csrf(console) -> None:
    """The session changes of issue 44 keep the CSRF check of cookie writes."""
    client = console.client()
    r = client.post("/api/v1/auth/login", json={"username": "ada", "password": "admin-pass-1"})
    assert r.status_code == 200
    assert client.post("/api/v1/auth/logout").status_code == 403
    assert client.post("/api/v1/auth/logout", headers={CSRF_HEADER: client.cookies.get("cg_csrf")}).status_code == 204


SECRETS = ("Mq77-broker-pw", "CamS3cret-77", "W3bhook-pw")


@pytest.mark.slow
def test_no_secret_leaves_a_site_in_bundles_logs_or_files(console_video: Path, tmp_path: Path, make_event) -> None:
    """Issue 44, target 1: `campusguard serve` of a site with an MQTT password, an offline camera with
    credentials and a refusing webhook with credentials; one incident exported through the API and the CLI.
    Neither bundle, nor the service's whole log, nor any file it wrote holds one of the three secrets."""
    import os
    import signal
    import sys
    import time
    import zipfile
    from datetime import UTC, datetime

    import httpx
    from fakes_console import free_port, wait_until_serving

    from campusguard.app.console.identity.users import UserStore
    from campusguard.app.events.sqlite import SQLiteEventStore
    from campusguard.cli.main import main

    site = tmp_path / "site"
    site.mkdir()
    closed = free_port()
    text = console_yaml(console_video, site, live=True).replace("detector:\n", "detector:\n  imgsz: 320\n")
    text = text.replace("classes: [person]", "classes: [0]").replace("classes: [car]", "classes: [2]")
    text = text.replace(
        "alerts:\n",
        f"  - id: gate\n    source: rtsp://cam:{SECRETS[1]}@127.0.0.1:{closed}/live\n    stall_timeout_s: 1\n"
        "alerts:\n"
        f"  - kind: mqtt\n    host: 127.0.0.1\n    port: {free_port()}\n    username: cg\n    password: {SECRETS[0]}\n"
        f"  - kind: webhook\n    url: http://hook:{SECRETS[2]}@127.0.0.1:{closed}/in\n    backoff_s: 0.2\n",
    )
    config = tmp_path / "watch.yaml"  # the operator's own file: outside the folder the service writes
    config.write_text(text)
    with SQLiteEventStore(site / "events.db") as store:
        store.record(make_event(event_id="inc1", camera_id="cam1", started_at=datetime.now(UTC)))
    db = site / "users.db"
    with UserStore(db) as users:
        users.add_user("ada", "admin", "admin-pass-1")
        token = users.create_api_token("ada")
    port = free_port()
    src = str(Path(__file__).parents[3] / "src")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "campusguard.cli.main",
            "serve",
            str(config),
            "--port",
            str(port),
            "--users-db",
            str(db),
            "--log-level",
            "info",
        ],  # fmt: skip
        env={**os.environ, "PYTHONPATH": src},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=site,
    )
    base, h = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    try:
        wait_until_serving(proc, base)
        # an alert through the sinks: the webhook refuses it (connection refused), the broker is not there
        httpx.post(f"{base}/api/v1/events/inc1/acknowledge", headers=h, json={"note": "seen"})
        exported = httpx.post(
            f"{base}/api/v1/evidence", headers=h, json={"ids": ["inc1"], "reason": "police"}, timeout=60
        )
        assert exported.status_code == 200, exported.text
        (tmp_path / "api.zip").write_bytes(exported.content)
        time.sleep(3)  # reconnect attempts of the offline camera, failed webhook and broker attempts
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert main(["evidence", "export", str(config), "--event", "inc1", "--out", str(tmp_path / "cli.zip"),
                 "--reason", "insurer", "--users-db", str(db)]) == 0  # fmt: skip
    assert stat_mode(tmp_path / "cli.zip") == 0o600
    log = out + err
    assert "camera gate" in log or "gate" in log, log[-2000:]  # the offline camera was reported
    for secret in SECRETS:
        assert secret not in log, f"{secret} in the service's log"
        for bundle in (tmp_path / "api.zip", tmp_path / "cli.zip"):
            with zipfile.ZipFile(bundle) as zf:
                for name in zf.namelist():
                    assert secret.encode() not in zf.read(name), f"{secret} in {bundle.name}:{name}"
        for path in site.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), f"{secret} in {path}"
    with zipfile.ZipFile(tmp_path / "cli.zip") as zf:
        copy = zf.read("config/watch.yaml").decode()
    assert f"rtsp://cam:***@127.0.0.1:{closed}/live" in copy and 'password: "***"' in copy


def stat_mode(path: Path) -> int:
    import stat

    return stat.S_IMODE(path.stat().st_mode)
