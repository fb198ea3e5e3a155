"""`assign_cameras`: balanced, the same on every node, and moving only what a membership change must."""

from __future__ import annotations

import itertools

from campusguard.app.nodes.assign import assign_cameras

CAMS = [f"cam{i}" for i in range(1, 13)]


def test_even_and_complete():
    for n in range(1, 6):
        nodes = [f"n{i}" for i in range(n)]
        got = assign_cameras(CAMS, nodes)
        assert set(got) == set(CAMS)
        counts = [list(got.values()).count(x) for x in nodes]
        assert max(counts) - min(counts) <= 1, (n, counts)


def test_the_same_answer_whatever_the_order():
    nodes = ["a", "b", "c"]
    first = assign_cameras(CAMS, nodes)
    for perm in itertools.permutations(nodes):
        assert assign_cameras(list(reversed(CAMS)), list(perm)) == first


def test_four_cameras_two_nodes_each_runs_two():
    got = assign_cameras(["cam1", "cam2", "cam3", "cam4"], ["alpha", "beta"])
    assert sorted(got.values()) == ["alpha", "alpha", "beta", "beta"]


def test_a_node_leaving_moves_only_its_cameras_and_one_coming_back_takes_only_its_share():
    three = assign_cameras(CAMS, ["a", "b", "c"])
    two = assign_cameras(CAMS, ["a", "b"], current={k: v for k, v in three.items() if v != "c"})
    moved = {c for c in CAMS if three[c] != two[c]}
    assert moved == {c for c in CAMS if three[c] == "c"}  # nothing that stayed on a live node moved
    back = assign_cameras(CAMS, ["a", "b", "c"], current=two)
    assert sorted(back.values()).count("c") == 4
    assert sum(back[c] != two[c] for c in CAMS) == 4  # exactly c's share moves, once
    assert assign_cameras(CAMS, ["a", "b", "c"], current=back) == back  # and then nothing moves


def test_the_current_holder_keeps_a_camera_only_within_its_room():
    got = assign_cameras(["cam1", "cam2", "cam3", "cam4"], ["alpha", "beta"], current=dict.fromkeys(
        ["cam1", "cam2", "cam3", "cam4"], "alpha"))
    assert sorted(got.values()) == ["alpha", "alpha", "beta", "beta"]


def test_preferences_are_honoured_while_the_node_is_live():
    got = assign_cameras(CAMS, ["a", "b"], {"cam1": "b", "cam2": "b", "cam3": "zz"})
    assert got["cam1"] == got["cam2"] == "b"
    assert got["cam3"] in {"a", "b"}  # a preferred node that is not live: anywhere
    assert assign_cameras(CAMS, ["a"], {"cam1": "b"})["cam1"] == "a"


def test_no_node_no_assignment():
    assert assign_cameras(CAMS, []) == {}
