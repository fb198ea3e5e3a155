"""`serve --node` refuses what cannot work, in one line (exit 2), before anything starts."""

from __future__ import annotations

import pytest

from campusguard.cli.main import main
from campusguard.cli.serve import node_name
from campusguard.errors import InvalidInputError


def test_node_needs_postgresql_a_name_and_no_ray():
    pg = "postgresql://u@127.0.0.1/db"
    assert node_name(None, pg, None) is None  # without --node, serve on PostgreSQL is one box as before
    assert node_name("north-1", pg, None) == "north-1"
    assert node_name("", pg, None)  # --node '': the host's name
    with pytest.raises(InvalidInputError, match="--node needs the site's PostgreSQL store"):
        node_name("north", None, None)
    with pytest.raises(InvalidInputError, match="--node and --ray do not go together"):
        node_name("north", pg, "auto")
    with pytest.raises(InvalidInputError, match="is not a node name"):
        node_name("north pole", pg, None)


def test_serve_node_on_sqlite_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "site.yaml"
    config.write_text(f"cameras:\n  - id: gate\n    source: {tmp_path / 'none.mp4'}\nstorage:\n  sqlite: {tmp_path / 'e.db'}\n")
    assert main(["serve", str(config), "--node", "north", "--port", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --node needs the site's PostgreSQL store") and len(err.splitlines()) == 1
