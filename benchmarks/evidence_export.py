"""Evidence export on the demo scene (issue 35, target 1): incidents with real clips, exported and verified.

The demo's synthetic campus video (`campusguard.app.demo.demo_console_config`, seed ``--seed``) is
watched by the console runtime (the `serve` composition: bundled detector, clips, snapshots) on
``--cameras`` cameras fed the same file, so one run yields enough incidents; then the first ``--incidents``
incidents that have a clip are exported with `export_case` and checked with `verify_bundle`.
Prints the pipeline time (not part of the target), the export time and the verify time.

    python benchmarks/evidence_export.py --seed 0 --seconds 40 --cameras 4 --incidents 20
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from pathlib import Path

import yaml

from campusguard.app.console.runtime import ConsoleRuntime
from campusguard.app.demo import demo_console_config
from campusguard.app.evidence.bundle import verify_bundle
from campusguard.app.evidence.case import CaseSource
from campusguard.app.evidence.export import export_case
from campusguard.app.evidence.keys import load_or_create_key


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--cameras", type=int, default=4)
    ap.add_argument("--incidents", type=int, default=20)
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="cg-evidence-bench-"))
    config = demo_console_config(args.seed, out, args.seconds, None)
    data = yaml.safe_load(config.read_text())
    cam = data["cameras"][0]
    cam.update(realtime=False, loop=False)
    data["cameras"] = [{**cam, "id": f"{cam['id']}-{i}"} for i in range(args.cameras)]
    data["storage"] = {"sqlite": str(out / "events.db")}
    config.write_text(yaml.safe_dump(data, sort_keys=False))

    t0 = time.perf_counter()
    runtime = ConsoleRuntime(config, out=io.StringIO())
    runtime.start()
    service = runtime.service
    assert service is not None
    service.wait(3600)
    time.sleep(4)  # the clips' post-roll and writer
    pipeline_s = time.perf_counter() - t0
    records, total = runtime.store.query_records(limit=None, newest_first=False)
    with_clip = [r for r in records if runtime.event_media(r.event.event_id, "clip")][: args.incidents]
    runtime.stop()
    print(
        f"pipeline: {total} incidents on {args.cameras} cameras in {pipeline_s:.1f} s; {len(with_clip)} with a clip exported"
    )

    source = CaseSource.from_config(config)
    try:
        records = source.select([r.event.event_id for r in with_clip])
        t1 = time.perf_counter()
        result = export_case(
            source,
            records,
            out / "CASE.zip",
            key=load_or_create_key(out / "evidence-key.pem"),
            user="bench",
            reason="benchmark",
        )
        export_s = time.perf_counter() - t1
    finally:
        source.close()
    t2 = time.perf_counter()
    check = verify_bundle(result.path)
    verify_s = time.perf_counter() - t2
    print(
        f"export: {len(result.incidents)} incidents, {result.files} files, {result.size:,} bytes in {export_s:.2f} s; "
        f"verify: {'ok' if check.ok else check.problems} in {verify_s:.2f} s"
    )


if __name__ == "__main__":
    main()
