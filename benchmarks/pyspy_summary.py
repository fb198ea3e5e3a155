"""Summarise a py-spy raw profile (``py-spy record -f raw``) of `campusguard watch`: busy samples per worker
thread and per function, waiting left out.

py-spy samples every Python thread at a fixed rate; a sample whose innermost frame is a wait (a
condition, an event, a queue, a join) is idle time and is dropped, so what is left is where the
threads worked. Start-up (imports, model load, camera set-up) is reported as its own line.

    py-spy record -r 200 -f raw -o watch.txt -- python -m campusguard.cli.main watch watch.yaml
    python benchmarks/pyspy_summary.py watch.txt --frames 300 [--under AnalyticsWorker.run]
"""

from __future__ import annotations

import argparse
import collections
import re

WAIT = re.compile(r"^(Condition\.wait|Event\.wait|Thread\._wait_for_tstate_lock|Queue\.get|sleep|select|_wait|wait) ")
WORKER = re.compile(r"(\w+Worker|CameraReader|Watchdog|RetentionCleaner|MetricsReporter)\.run ")


def frames_of(stack: str) -> list[str]:
    """The stack's frames as ``function (file)``, outermost first, the thread name dropped."""
    return [re.sub(r" \((.*?/)?([^/]*):\d+\)$", r" (\2)", f) for f in stack.split(";")[1:]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("--rate", type=float, default=200.0, help="py-spy's sampling rate (-r)")
    ap.add_argument("--frames", type=int, default=0, help="frames the run processed: adds ms per frame")
    ap.add_argument("--under", default=None, help="break down the samples under this function")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    worker: collections.Counter[str] = collections.Counter()
    selfs: collections.Counter[str] = collections.Counter()
    under: collections.Counter[str] = collections.Counter()
    total = under_total = 0
    with open(args.profile, encoding="utf-8") as fh:
        for line in fh:
            stack, count = line.rstrip().rsplit(" ", 1)
            n = int(count)
            fns = frames_of(stack)
            if not fns or WAIT.match(fns[-1]):
                continue
            total += n
            w = next((f for f in fns if WORKER.match(f)), None)
            if w is None:
                startup = any("WatchService.start" in f or "_find_and_load" in f for f in fns)
                w = "start-up (imports, model load, cameras)" if startup else "main thread, other"
            worker[w] += n
            selfs[fns[-1]] += n
            if args.under:
                i = next((i for i, f in enumerate(fns) if f.startswith(args.under)), None)
                if i is not None:
                    under_total += n
                    for f in set(fns[i + 1 :]):
                        under[f] += n

    def fmt(n: int) -> str:
        ms = n / args.rate * 1000
        per = f", {ms / args.frames:6.2f} ms/frame" if args.frames else ""
        return f"{n:6d} samples {100 * n / max(1, total):5.1f}% ({ms / 1000:6.2f} s{per})"

    print(f"{total} busy samples at {args.rate:g} Hz ({total / args.rate:.2f} thread-seconds of work)")
    print("by thread:")
    for w, n in worker.most_common(args.top):
        print(f"  {fmt(n)}  {w}")
    print("by function (self):")
    for f, n in selfs.most_common(args.top):
        print(f"  {fmt(n)}  {f}")
    if args.under:
        print(f"under {args.under} ({under_total} samples), inclusive:")
        for f, n in under.most_common(args.top):
            print(f"  {fmt(n)}  {f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
