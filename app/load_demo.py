"""Bounded load check of the web demo: N browser-like sessions ask at once on loopback.

    python -m app.load_demo                                # 8 sessions, 60 s budget, app started in-process
    python -m app.load_demo --url http://127.0.0.1:7871 --sessions 4 --budget-s 30

Each session is a thread with its own gradio_client Client asking a different demo question (cycling
assets/questions.jsonl) through `/ask`, all submitted together. The app answers `concurrency` questions at
a time (2 by default) and queues the rest, so latency here is queue wait + answer. After the burst the
same questions are asked one after another as the baseline (not counted in the budget), so the table shows
what the queue and the shared CPU add to each, and the summary compares throughput with the serial run.
The baseline runs second on purpose: the burst meets a fresh app, while the baseline finds per-process
caches warm (the embedded policy keeps each picture's OCR), so the ratios err against the burst.

The whole burst is bounded: at --budget-s every unfinished session is cancelled and counted as an error.
Prints per session (id, queue wait, latency, server-side episode time, correct, error), then errors
(target 0), latency p50/p90/max, throughput, and where the time went. Exit code 1 on any error or timeout.
Traffic goes only to the given URL (127.0.0.1 when the app is started here).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any

from tqdm import tqdm

from app.demo_questions import ask, connect, fmt_s, start_app

MAX_BUDGET_S = 600.0  # the check never runs longer than this, whatever --budget-s says


def pct(xs: list[float], p: float) -> float:
    """The p-th percentile by nearest rank (p in 0..100) of a non-empty list."""
    v = sorted(xs)
    return v[min(len(v) - 1, max(0, round(p / 100 * len(v) + 0.5) - 1))]


def burst(url: str, qs: list[dict[str, Any]], sessions: int, budget_s: float) -> tuple[list[dict], float]:
    """Run `sessions` sessions at once; returns (rows in session order, wall seconds of the burst)."""
    rows: list[dict | None] = [None] * sessions
    start = threading.Barrier(sessions + 1)
    deadline = [0.0]
    bar = tqdm(total=sessions, desc="sessions answered", unit="q")

    def session(i: int) -> None:
        q = qs[i % len(qs)]
        try:
            client = connect(url)  # each session its own client, like separate browser tabs
        except Exception as e:  # noqa: BLE001 - a refused connection is a result, not a crash
            start.wait()
            rows[i] = {"id": q["id"], "error": f"could not connect: {e}"}
            return
        start.wait()
        try:
            rows[i] = ask(client, q, deadline=deadline[0])
        except Exception as e:  # noqa: BLE001
            rows[i] = {"id": q["id"], "error": f"{type(e).__name__}: {e}"}
        bar.update(1)

    threads = [threading.Thread(target=session, args=(i,), daemon=True, name=f"session-{i}") for i in range(sessions)]
    for t in threads:
        t.start()
    deadline[0] = time.perf_counter() + budget_s  # set before the barrier releases anyone
    t0 = time.perf_counter()
    start.wait()
    for t in threads:  # ask() gives up at the deadline; the extra seconds cover its cancel
        t.join(timeout=max(0.0, deadline[0] + 5.0 - time.perf_counter()))
    wall = time.perf_counter() - t0
    bar.close()
    for i, r in enumerate(rows):
        if r is None:
            rows[i] = {"id": qs[i % len(qs)]["id"], "error": f"session still running {wall:.0f} s after the start"}
    return rows, wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running demo (default: start one in this process)")
    ap.add_argument("--workdir", help="workdir for the in-process app (default: a fresh temporary folder)")
    ap.add_argument("--sessions", type=int, default=8, help="concurrent sessions (default 8)")
    ap.add_argument("--budget-s", type=float, default=60.0, help="bound on the whole burst (default 60)")
    ap.add_argument("--concurrency", type=int, default=2, help="the in-process app's concurrency limit")
    ap.add_argument("--no-baseline", action="store_true", help="skip the serial baseline (quicker)")
    args = ap.parse_args(argv)
    budget = min(args.budget_s, MAX_BUDGET_S)

    from app.workspace import load_questions

    qs = load_questions()
    if not qs:
        raise SystemExit("no questions: assets/questions.jsonl is missing or empty")
    url, close = (args.url, lambda: None) if args.url else start_app(args.workdir, args.concurrency)
    try:
        rows, wall = burst(url, qs, args.sessions, budget)
        base: list[dict] = []
        if not args.no_baseline:  # after the burst: the burst meets a fresh app, the baseline a warm one
            client = connect(url)
            for i in tqdm(range(args.sessions), desc="baseline, one at a time", unit="q"):
                base.append(ask(client, qs[i % len(qs)], deadline=time.perf_counter() + budget))
    finally:
        close()

    print(
        f"\n{'session':>7} {'id':<18} {'queue s':>7} {'first step s':>12} {'latency s':>9} {'episode s':>9} "
        f"{'alone s':>7} {'x alone':>7} {'correct':<7} error"
    )
    for i, r in enumerate(rows):
        alone = base[i]["latency_s"] if base and not base[i]["error"] else None
        ratio = f"{r['latency_s'] / alone:.1f}" if alone and r.get("latency_s") and not r["error"] else "-"
        print(
            f"{i:>7} {r['id']:<18} {fmt_s(r.get('queue_s')):>7} {fmt_s(r.get('first_step_s')):>12} "
            f"{fmt_s(r.get('latency_s')):>9} {fmt_s(r.get('server_s')):>9} {fmt_s(alone):>7} {ratio:>7} "
            f"{'yes' if r.get('correct') else 'no':<7} {r['error'][:70]}"
        )
    errors = sum(1 for r in rows if r["error"])
    ok = [r for r in rows if not r["error"] and r.get("latency_s") is not None]
    print(
        f"\nsessions {len(rows)} · errors {errors} (must be 0) · correct "
        f"{sum(bool(r.get('correct')) for r in rows)}/{len(rows)} · burst wall {wall:.1f} s (budget {budget:.0f} s)"
    )
    if ok:
        lat = [r["latency_s"] for r in ok]
        print(
            f"latency p50 {pct(lat, 50):.1f} s · p90 {pct(lat, 90):.1f} s · max {max(lat):.1f} s · "
            f"throughput {len(ok) / wall * 60:.1f} questions/min"
        )
        queue = [r["queue_s"] for r in ok if r.get("queue_s") is not None]
        episodes = [r["server_s"] for r in ok if r.get("server_s") is not None]
        if queue:
            print(
                f"where the time goes: queue wait p50 {pct(queue, 50):.1f} s, max {max(queue):.1f} s; "
                f"sum of server episode times {sum(episodes):.1f} s over {wall:.1f} s wall "
                f"(= {sum(episodes) / wall:.2f} episodes running on average)"
            )
    if base and not any(b["error"] for b in base):
        serial = sum(b["latency_s"] for b in base)
        alone_ep = sum(b["server_s"] or 0.0 for b in base)
        print(
            f"baseline, the same {len(base)} questions one at a time: {serial:.1f} s "
            f"({len(base) / serial * 60:.1f} questions/min; server episodes {alone_ep:.1f} s)"
        )
        if ok:
            print(
                f"burst vs serial: throughput {len(ok) / wall / (len(base) / serial):.2f}x · "
                f"episode time {sum(r['server_s'] or 0.0 for r in ok) / max(alone_ep, 1e-9):.2f}x of alone"
            )
    elif base:
        print(f"baseline had errors: {[b['error'] for b in base if b['error']]}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
