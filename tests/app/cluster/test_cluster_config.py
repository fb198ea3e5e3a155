"""The `cluster` config section: defaults, bounds, and errors naming the line."""

from __future__ import annotations

import pytest

from campusguard.app.config import ClusterConfig, parse_config
from campusguard.errors import ConfigError

CAMERA = "cameras:\n  - id: cam0\n    source: a.mp4\n"


def test_defaults_need_no_section() -> None:
    cluster = parse_config(CAMERA).config.cluster
    assert cluster == ClusterConfig()
    assert (cluster.cameras_per_actor, cluster.num_cpus, cluster.num_gpus, cluster.max_restarts) == (4, 1.0, 0.0, 3)
    assert cluster.strategy == "spread"


def test_a_full_section_is_read() -> None:
    text = CAMERA + (
        "cluster:\n  cameras_per_actor: 8\n  num_gpus: 0.5\n  resources: {campus-north: 1}\n"
        "  strategy: pack\n  max_restarts: -1\n"
    )
    cluster = parse_config(text).config.cluster
    assert cluster.cameras_per_actor == 8 and cluster.num_gpus == 0.5
    assert cluster.resources == {"campus-north": 1.0} and cluster.strategy == "pack" and cluster.max_restarts == -1


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("  cameras_per_actor: 0", "cluster.cameras_per_actor"),
        ("  num_cpus: -1", "cluster.num_cpus"),
        ("  strategy: random", "cluster.strategy"),
        ("  max_restarts: -2", "cluster.max_restarts"),
        ("  placement: spread", "cluster"),
    ],
)
def test_bad_values_are_one_line_naming_the_line(line: str, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(CAMERA + "cluster:\n" + line + "\n", "cfg.yaml")
    message = str(info.value)
    assert message.startswith(f"cfg.yaml:5: {field}") and "\n" not in message
