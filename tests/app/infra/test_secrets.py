"""The one owner of secrets (issue 44): which config values are secret, how URLs, free text, config
mappings and config files are shown without them, where they come from (inline, *_env, *_file), and the
log filter that takes them out of every line of the CLI's log, whoever formatted it."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
import yaml

from campusguard.app.infra.secrets import (
    RedactingFilter,
    is_secret_field,
    redact_config_yaml,
    redact_mapping,
    redact_text,
    redact_url,
    remember_secret,
    resolve_secret,
    secret_values,
    with_password,
)
from campusguard.errors import ConfigError


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("rtsp://cam:S3cret@10.0.0.9:554/Streaming/Channels/101", "rtsp://cam:***@10.0.0.9:554/Streaming/Channels/101"),
        ("rtsp://10.0.0.9/live", "rtsp://10.0.0.9/live"),
        ("https://hook:pw@hooks.example.org/in?token=abc&x=1", "https://hook:***@hooks.example.org/in?token=***&x=1"),
        ("https://h.example.org/a?sig=zz&api_key=k1", "https://h.example.org/a?sig=***&api_key=***"),
        (
            "https://hooks.slack.com/services/T0AB12CD/B0AB12CD/zyxw9876vuts5432rqpo1098",
            "https://hooks.slack.com/services/T0AB12CD/B0AB12CD/***",
        ),
        ("postgresql://ops:s3cret@db/events?password=s3cret", "postgresql://ops:***@db/events?password=***"),
        ("not a url", "not a url"),
    ],
)
def test_credentials_in_urls_are_redacted(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_secret_fields_are_known_by_name() -> None:
    assert all(is_secret_field(n) for n in ("password", "client_secret", "api_key", "token", "mqtt_password"))
    assert not any(is_secret_field(n) for n in ("password_env", "password_file", "username", "key_path", "name"))


def test_credentials_in_logs_are_redacted_by_the_cli_handler_whoever_formats_the_line() -> None:
    remember_secret("Mq77-broker-pw")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("campusguard.test_secrets")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("camera gate: cannot open video source %r", "rtsp://cam:S3cret@10.0.0.9/live")
        logger.warning("broker said: bad password Mq77-broker-pw")
        try:
            raise OSError("connect to https://hook:W3b@h.example/in failed")
        except OSError:
            logger.exception("delivery failed")
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert "S3cret" not in text and "Mq77-broker-pw" not in text and "W3b@" not in text
    assert "rtsp://cam:***@10.0.0.9/live" in text and "https://hook:***@h.example/in" in text


def test_the_cli_log_handler_redacts(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from campusguard.cli.logs import _CliHandler, setup_logging

    root = logging.getLogger()
    # a CLI handler an earlier test left writes to that test's (closed) stderr: start from this test's own
    monkeypatch.setattr(root, "handlers", [h for h in root.handlers if not isinstance(h, _CliHandler)])
    setup_logging("warning")
    logging.getLogger("campusguard.test_cli").warning("source rtsp://u:CliS3cret@host/x down")
    assert "CliS3cret" not in capsys.readouterr().err


def test_redact_text_catches_secret_query_values_of_bare_paths() -> None:
    line = '127.0.0.1:5 - "GET /auth/oidc/callback?code=c0de-123&state=s1 HTTP/1.1" 303'
    assert redact_text(line) == '127.0.0.1:5 - "GET /auth/oidc/callback?code=***&state=s1 HTTP/1.1" 303'


def test_redact_text_catches_urls_in_free_text() -> None:
    line = "error: camera 'gate': cannot open video source 'rtsp://cam:pw1234@10.0.0.9:554/x' (timeout)"
    assert (
        redact_text(line) == "error: camera 'gate': cannot open video source 'rtsp://cam:***@10.0.0.9:554/x' (timeout)"
    )


CONFIG = """\
# the site
cameras:
  - id: gate
    source: rtsp://cam:S3cr%40t-pw@10.0.0.9:554/live   # the gate camera
alerts:
  - kind: mqtt
    username: cg
    password: Mq77-broker-pw
  - kind: webhook
    url: https://hook:W3bhook-pw@hooks.example.org/in?token=tok123456
    headers: {X-Api-Key: hdr-secret-9}
"""


def test_evidence_bundles_carry_no_secrets_the_config_copy_is_redacted_in_place() -> None:
    out = redact_config_yaml(CONFIG)
    for secret in ("S3cr%40t-pw", "S3cr@t-pw", "Mq77-broker-pw", "W3bhook-pw", "tok123456", "hdr-secret-9"):
        assert secret not in out
    assert "# the gate camera" in out and out.count("\n") == CONFIG.count("\n")  # comments and lines kept
    assert "rtsp://cam:***@10.0.0.9:554/live" in out
    assert not secret_values(yaml.safe_load(out))


def test_a_secret_yaml_spells_with_escapes_is_redacted_too() -> None:
    text = 'alerts:\n  - kind: mqtt\n    username: cg\n    password: "Esc\\u0041ped-pw"  # escaped\n'
    out = redact_config_yaml(text)
    assert "EscAped-pw" not in out and "Esc\\u0041ped-pw" not in out
    assert 'password: "***"  # escaped' in out
    assert redact_mapping({"a": {"password": "x", "u": "http://a:b@h/"}}) == {
        "a": {"password": "***", "u": "http://a:***@h/"}
    }
    assert redact_config_yaml("a: [unclosed\n").startswith("# the config file could not be read as YAML")


def test_every_secret_can_come_from_the_environment_or_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CG_TEST_SECRET", "from-env-secret")
    secret_file = tmp_path / "pw"
    secret_file.write_text("from-file-secret\nignored\n")
    assert resolve_secret(None, "CG_TEST_SECRET", None, "x") == "from-env-secret"
    assert resolve_secret(None, None, str(secret_file), "x") == "from-file-secret"
    assert resolve_secret("inline", None, None, "x") == "inline"
    assert redact_text("said from-file-secret") == "said ***"  # remembered once resolved
    with pytest.raises(ConfigError, match="one way only"):
        resolve_secret("a", "CG_TEST_SECRET", None, "x")
    monkeypatch.delenv("CG_TEST_SECRET")
    with pytest.raises(ConfigError, match="^camera 'gate': the environment variable CG_TEST_SECRET is not set$"):
        resolve_secret(None, "CG_TEST_SECRET", None, "camera 'gate'")
    with pytest.raises(ConfigError, match="cannot read the secret file"):
        resolve_secret(None, None, str(tmp_path / "missing"), "x")
    assert with_password("rtsp://cam@10.0.0.9/live", "p@ss/w") == "rtsp://cam:p%40ss%2Fw@10.0.0.9/live"


def test_a_camera_password_comes_from_the_environment_into_its_url(monkeypatch: pytest.MonkeyPatch) -> None:
    from campusguard.app.config import parse_config
    from campusguard.app.engine.wiring import camera_source

    loaded = parse_config(
        "cameras:\n  - id: gate\n    source: rtsp://cam@10.0.0.9/live\n    password_env: CG_CAM_PW\n", "w.yaml"
    )
    monkeypatch.setenv("CG_CAM_PW", "Cam-env-pw")
    assert camera_source(loaded.config.cameras[0]) == "rtsp://cam:Cam-env-pw@10.0.0.9/live"
    assert (
        redact_text("opened rtsp://cam:Cam-env-pw@10.0.0.9/live and Cam-env-pw")
        == "opened rtsp://cam:***@10.0.0.9/live and ***"
    )
    with pytest.raises(ConfigError, match="need a stream URL"):
        parse_config("cameras:\n  - id: gate\n    source: video.mp4\n    password_env: CG_CAM_PW\n", "w.yaml")


def test_secrets_beside_numbers_in_lists_are_found() -> None:
    """Lists of numbers (a polygon's thousands) are passed over in one step; a list that mixes numbers
    with a URL or a mapping is still looked at item by item."""
    from campusguard.app.infra.secrets import secret_values

    data = {
        "zones": [{"polygon": [[0.5, 1.0]] * 300}],
        "mixed": [[1, 2], [3, "mqtt://u:Sekret-in-list@broker"]],
        "deeper": [[1.0, [{"password": "Pw-beside-numbers"}]]],
        "ragged": [[1.0, 2.0], [3.0]],
    }
    assert secret_values(data) == {"Sekret-in-list", "Pw-beside-numbers"}
