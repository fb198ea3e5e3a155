"""eval-events: matching table, scores, start error, truth loading, and the two CLI commands."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta

import pytest

from campusguard.app.eval_events import Incident, evaluate_events, incidents_from_events, load_truth
from campusguard.app.events import Event, SQLiteEventStore
from campusguard.cli.main import main
from campusguard.errors import InvalidInputError


def _inc(kind="crowd", zone="plaza", start=10.0, end=20.0, camera="cam0"):
    return Incident(camera, kind, zone, start, end)


@pytest.mark.parametrize(
    ("truth", "predicted", "tp", "fp", "fn", "errors"),
    [
        ([_inc()], [_inc(start=11.0, end=19.0)], 1, 0, 0, [1.0]),
        ([_inc()], [_inc(start=21.5, end=25.0)], 1, 0, 0, [11.5]),  # starts within the 2 s tolerance of the end
        ([_inc()], [_inc(start=22.5, end=25.0)], 0, 1, 1, []),  # too late
        ([_inc()], [_inc(start=5.0, end=8.5)], 1, 0, 0, [5.0]),  # ends within tolerance before
        ([_inc()], [_inc(zone="gate")], 0, 1, 1, []),  # other zone
        ([_inc()], [_inc(kind="intrusion")], 0, 1, 1, []),  # other kind
        ([_inc()], [_inc(camera="cam1")], 0, 0, 1, []),  # a camera without truth is not scored
        ([_inc()], [_inc(start=10.5), _inc(start=12.0)], 1, 1, 0, [0.5]),  # one-to-one: the closer start wins
        # two truths, two predictions overlapping both: the assignment maximises matches
        (
            [_inc(start=0, end=10), _inc(start=12, end=30)],
            [_inc(start=9, end=13), _inc(start=1, end=2)],
            2,
            0,
            0,
            [1.0, 3.0],
        ),
        ([], [_inc()], 0, 0, 0, []),  # predictions for a camera with no truth at all are ignored
    ],
)
def test_matching_table(truth, predicted, tp, fp, fn, errors):
    scores = evaluate_events(truth, predicted, tolerance_s=2.0)
    o = scores.overall
    assert (o.tp, o.fp, o.fn) == (tp, fp, fn)
    assert sorted(abs(p.start_s - t.start_s) for t, p in scores.matches) == pytest.approx(errors)


def test_scores_per_kind_and_overall():
    truth = [_inc("crowd", start=10), _inc("crowd", start=40, end=50), _inc("intrusion", "gate", 5, 6)]
    predicted = [_inc("crowd", start=11), _inc("intrusion", "gate", 5.5, 6), _inc("intrusion", "gate", 30, 31)]
    scores = evaluate_events(truth, predicted)
    crowd, intrusion = scores.per_kind["crowd"], scores.per_kind["intrusion"]
    assert (crowd.precision, crowd.recall, crowd.f1) == pytest.approx((1.0, 0.5, 2 / 3))
    assert (intrusion.precision, intrusion.recall, intrusion.f1) == pytest.approx((0.5, 1.0, 2 / 3))
    o = scores.overall
    assert (o.tp, o.fp, o.fn) == (2, 1, 1)
    assert (o.precision, o.recall) == pytest.approx((2 / 3, 2 / 3))
    assert o.start_error_mean_s == pytest.approx(0.75) and o.start_error_median_s == pytest.approx(0.75)
    assert json.loads(json.dumps(scores.to_dict()))["overall"]["tp"] == 2


def test_nothing_found_scores_zero_and_nan_error():
    scores = evaluate_events([_inc()], [])
    assert (scores.overall.precision, scores.overall.recall, scores.overall.f1) == (1.0, 0.0, 0.0)
    assert math.isnan(scores.overall.start_error_mean_s)
    assert scores.to_dict()["overall"]["start_error_mean_s"] is None


def test_camera_filter_and_validation():
    truth = [_inc(camera="cam0"), _inc(camera="cam1")]
    scores = evaluate_events(truth, [_inc(camera="cam1")], camera_id="cam1")
    assert (scores.overall.tp, scores.overall.fn) == (1, 0)
    with pytest.raises(InvalidInputError, match="cam9"):
        evaluate_events(truth, [], camera_id="cam9")
    with pytest.raises(InvalidInputError, match="tolerance"):
        evaluate_events(truth, [], tolerance_s=-1)


def _truth_file(tmp_path, camera="cam0"):
    data = {
        "camera_id": camera,
        "zones": {},
        "lines": {},
        "params": {},
        "frames": 300,
        "incidents": [
            {"kind": "crowd", "zone": "plaza", "start_s": 10.0, "end_s": 16.0, "track_ids": [2, 3, 4]},
            {"kind": "line_crossing", "zone": "gate", "start_s": 23.7, "end_s": 23.7, "track_ids": [7]},
        ],
    }
    path = tmp_path / f"{camera}.json"
    path.write_text(json.dumps(data))
    return path


def test_load_truth(tmp_path):
    incidents = load_truth(_truth_file(tmp_path))
    assert incidents[0] == Incident("cam0", "crowd", "plaza", 10.0, 16.0, (2, 3, 4))
    bad = tmp_path / "bad.json"
    bad.write_text('{"camera_id": "c", "incidents": [{"kind": "crowd"}]}')
    with pytest.raises(InvalidInputError, match=r"incidents\[0\]"):
        load_truth(bad)
    bad.write_text("{not json")
    with pytest.raises(InvalidInputError, match="not valid JSON"):
        load_truth(bad)


def _event(**kw):
    base = {
        "event_id": "a",
        "phase": "start",
        "camera_id": "cam0",
        "rule_name": "r",
        "rule_kind": "crowd",
        "zone": "plaza",
        "start_s": 10.4,
    }
    base.update(kw)
    return Event(**base)


def test_incidents_from_events_keeps_latest_state():
    got = incidents_from_events([_event(), _event(phase="end", end_s=15.0), _event(event_id="b", start_s=3.0)])
    assert [(i.start_s, i.end_s) for i in got] == [(10.4, 15.0), (3.0, 3.0)]


def _store(tmp_path):
    db = tmp_path / "events.db"
    t0 = datetime(2026, 1, 10, 22, 0, tzinfo=UTC)
    with SQLiteEventStore(db) as store:
        store.record(_event(started_at=t0))
        store.record(_event(phase="end", end_s=16.2, started_at=t0))
        store.record(
            _event(
                event_id="b",
                rule_name="gate",
                rule_kind="line_crossing",
                zone="gate",
                start_s=23.8,
                end_s=23.8,
                started_at=t0 + timedelta(minutes=1),
            )
        )
        store.record(
            _event(
                event_id="c",
                rule_kind="intrusion",
                zone="yard",
                start_s=50.0,
                camera_id="cam1",
                started_at=t0 + timedelta(minutes=2),
            )
        )
    return db


def test_cli_eval_events(tmp_path, capsys):
    db = _store(tmp_path)
    assert main(["eval-events", "--truth", str(_truth_file(tmp_path)), "--events", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["overall"]["tp"] == 2 and out["overall"]["fp"] == 0 and out["overall"]["f1"] == 1.0
    assert out["overall"]["start_error_mean_s"] == pytest.approx(0.25)
    assert main(["eval-events", "--truth", str(_truth_file(tmp_path)), "--events", str(db)]) == 0
    table = capsys.readouterr().out
    assert "overall" in table and "line_crossing" in table and "1.000" in table


def test_cli_events_query(tmp_path, capsys):
    db = _store(tmp_path)
    assert main(["events", "--db", str(db), "--camera", "cam0", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["event_id"] for r in rows] == ["a", "b"] and rows[0]["end_s"] == 16.2
    assert main(["events", "--db", str(db), "--since", "2026-01-10T22:01:30+00:00", "--format", "json"]) == 0
    assert [r["event_id"] for r in json.loads(capsys.readouterr().out)] == ["c"]
    assert main(["events", "--db", str(db), "--rule", "gate"]) == 0
    assert "line_crossing" in capsys.readouterr().out


def test_cli_events_notes_updates_waiting_in_the_spool(tmp_path, capsys, make_event):
    from campusguard.app.events.spool import EventSpool

    db = _store(tmp_path)
    assert main(["events", "--db", str(db), "--format", "json"]) == 0
    assert "spool" not in capsys.readouterr().err
    EventSpool(db.with_suffix(".spool.jsonl")).append([make_event(), make_event(phase="end", end_s=20.0)])
    assert main(["events", "--db", str(db), "--format", "json"]) == 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("note: 2 event update(s) in the spool") and len(err.splitlines()) == 1
    other = tmp_path / "elsewhere.jsonl"
    EventSpool(other).append([make_event()])
    assert main(["events", "--db", str(db), "--spool", str(other)]) == 0
    assert "note: 1 event update(s)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["events", "--db", "{tmp}/missing.db"], "does not exist"),
        (["events", "--db", "{db}", "--since", "yesterday"], "--since 'yesterday'"),
        (["events", "--db", "{db}", "--format", "xml"], "--format"),
        (["eval-events", "--truth", "{tmp}/none.json", "--events", "{db}"], "none.json does not exist"),
        (["eval-events", "--truth", "{gt}", "--truth", "{gt}", "--events", "{db}"], "both describe camera 'cam0'"),
    ],
)
def test_cli_errors_are_one_line(tmp_path, capsys, argv, message):
    db = _store(tmp_path)
    argv = [a.format(tmp=tmp_path, db=db, gt=_truth_file(tmp_path)) for a in argv]
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_parse_since_durations():
    from campusguard.cli.events import parse_since

    now = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
    assert parse_since("90m", now) == now - timedelta(minutes=90)
    assert parse_since("1d", now) == now - timedelta(days=1)
    assert parse_since("2026-01-10T08:00:00+00:00", now) == datetime(2026, 1, 10, 8, 0, tzinfo=UTC)
