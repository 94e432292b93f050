"""Load test of the HTTP search server on loopback: N concurrent clients for a bounded time.

    python -m eval.bench_server                        # 20 clients x 20 s on the bundled corpus
    python -m eval.bench_server --index bench_out/mmlb_idx --clients 20 --seconds 30
    python -m eval.bench_server --index bench_out/mmlb_idx --workers 1,2   # serve-search --workers, side by side

It starts `vimrag serve-search` in a subprocess on 127.0.0.1 (a free port), then measures, in the same
run, one client alone (the baseline) and `--clients` clients at once, each sending POST /search with
queries drawn from a fixed list. Prints requests/s, latency p50/p95, the error count (target: 0), and the CPU
the server spent (cores, and milliseconds per request).
With `--workers 1,2` it does so for each worker count in turn, one server after the other, and adds the
server's memory once loaded: the sum over its processes of RSS (which counts the pages workers share once per
worker) and of PSS (which splits each shared page between its sharers: what the machine really spends).
Traffic goes only to 127.0.0.1; every loop is bounded by count and time (at most 60 s per phase).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from retrieval.server import free_port

QUERIES = [
    "revenue by region",
    "robots shipped per quarter",
    "battery runtime",
    "pilot programme deadline",
    "defect rate calibration",
    "outlook for 2026",
    "Falcon X2 picker",
    "Tampere factory employees",
    "research spending",
    "LogiMAT booth",
]
MAX_SECONDS = 60.0
MAX_REQUESTS_PER_CLIENT = 100_000


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 180.0) -> None:
    import httpx

    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited early with code {proc.returncode}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.5)
    raise SystemExit(f"server at {url} not ready after {timeout:.0f}s")


def run_clients(url: str, n_clients: int, seconds: float, top_k: int) -> dict:
    """`n_clients` threads, each on one kept-alive connection, send POST /search for `seconds`.

    The client is the standard library's http.client: on this 2-core box the load generator shares the cores
    with the server, and httpx spent 0.25 of a core at 175 requests/s where http.client spends 0.07. The share
    the client took is reported (`client_cpu`)."""
    import http.client
    import json
    from urllib.parse import urlsplit

    host = urlsplit(url)
    seconds = min(seconds, MAX_SECONDS)
    lat: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def client(i: int) -> None:
        conn = http.client.HTTPConnection(host.hostname, host.port, timeout=30)
        try:
            for j in range(MAX_REQUESTS_PER_CLIENT):
                if time.perf_counter() >= stop:
                    return
                body = json.dumps({"queries": [QUERIES[(i + j) % len(QUERIES)]], "top_k": top_k})
                t = time.perf_counter()
                try:
                    conn.request("POST", "/search", body=body, headers={"content-type": "application/json"})
                    r = conn.getresponse()
                    data = r.read()
                    ok = r.status == 200 and len(json.loads(data)["results"]) == 1
                    err = None if ok else f"HTTP {r.status}"
                except Exception as e:  # noqa: BLE001 - every failure counts as an error
                    err = f"{type(e).__name__}: {e}"
                    conn.close()
                    conn = http.client.HTTPConnection(host.hostname, host.port, timeout=30)
                dt = time.perf_counter() - t
                with lock:
                    if err:
                        errors.append(err)
                    else:
                        lat.append(dt)
        finally:
            conn.close()

    cpu0 = time.process_time()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n_clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=seconds + 60)
    wall = time.perf_counter() - t0
    lat.sort()
    return {
        "client_cpu": (time.process_time() - cpu0) / wall,
        "clients": n_clients,
        "requests": len(lat),
        "errors": len(errors),
        "first_errors": errors[:3],
        "rps": len(lat) / wall,
        "p50_ms": 1000 * lat[len(lat) // 2] if lat else float("nan"),
        "p95_ms": 1000 * lat[int(0.95 * (len(lat) - 1))] if lat else float("nan"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", help="index folder (default: build one from the bundled corpus in a temp dir)")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=20.0, help=f"per phase, at most {MAX_SECONDS:.0f}")
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--workers", default="1", help="server worker counts to compare, e.g. 1,2")
    ap.add_argument("--rounds", type=int, default=1, help="alternate the worker counts this many times (medians)")
    args = ap.parse_args()
    counts = [int(w) for w in args.workers.split(",")]

    tmp = tempfile.TemporaryDirectory()
    idx = args.index
    if idx is None:
        from assets.make_corpus import make_corpus
        from retrieval.ingest import Indexer

        corpus = Path(tmp.name) / "corpus"
        make_corpus(corpus)
        idx = str(Path(tmp.name) / "idx")
        print(Indexer(idx).index([corpus], progress=False).format().splitlines()[0])
    runs = []
    try:
        for _ in range(args.rounds):
            for w in counts:
                runs.append(serve_and_load(idx, w, args))
    finally:
        tmp.cleanup()
    print(f"\n### search server load test on 127.0.0.1 ({args.seconds:.0f} s per phase, top_k={args.top_k})")
    print(
        "| workers | clients | requests | errors | req/s | p50 ms | p95 ms | req/s vs 1 client | client CPU "
        "| server CPU | server CPU ms per request |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for w, base, load, _ in runs:
        for r in (base, load):
            print(
                f"| {w} | {r['clients']} | {r['requests']} | {r['errors']} | {r['rps']:.1f} | {r['p50_ms']:.1f} | "
                f"{r['p95_ms']:.1f} | {r['rps'] / base['rps']:.2f} | {r['client_cpu']:.2f} | "
                f"{r['server_cores']:.2f} | {r['server_cpu_ms']:.2f} |"
            )
    if len(counts) > 1:
        import statistics

        med = {
            w: {
                key: statistics.median(r[i][key] if i == 2 else r[3][key] for r in runs if r[0] == w)
                for i, key in ((2, "rps"), (3, "rss"), (3, "pss"), (3, "used"))
            }
            for w in counts
        }
        load0 = mem0 = med[counts[0]]
        print(f"\nMedians over {args.rounds} alternating rounds:")
        print(
            f"\n| workers | req/s at {args.clients} clients | ratio | RSS MiB (sum) | PSS MiB (sum) | PSS ratio "
            "| MemAvailable drop MiB |"
        )
        print("|---|---|---|---|---|---|---|")
        for w in counts:
            load = mem = med[w]
            print(
                f"| {w} | {load['rps']:.1f} | {load['rps'] / load0['rps']:.2f} | {mem['rss']:.0f} | {mem['pss']:.0f} | "
                f"{mem['pss'] / mem0['pss']:.2f} | {mem['used']:.0f} |"
            )
    if any(b["errors"] or x["errors"] for _, b, x, _ in runs):
        print("errors:", [r["first_errors"] for _, b, x, _ in runs for r in (b, x) if r["errors"]])
        raise SystemExit(1)


def serve_and_load(idx: str, workers: int, args) -> tuple[int, dict, dict, dict]:
    """Start a server with `workers` processes, load it, measure it, stop it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "app.cli", "serve-search", "--index", idx, "--port", str(port)]
    before = available_mib()
    proc = subprocess.Popen([*cmd, "--workers", str(workers)])
    try:
        wait_ready(url, proc)
        run_clients(url, 1, 2.0, args.top_k)  # warm-up
        base = server_cpu(proc.pid, lambda: run_clients(url, 1, args.seconds, args.top_k))
        load = server_cpu(proc.pid, lambda: run_clients(url, args.clients, args.seconds, args.top_k))
        mem = memory(proc.pid)
        mem["used"] = before - available_mib()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return workers, base, load, mem


def server_cpu(pid: int, phase) -> dict:
    """Run `phase()` (a load test) and add the CPU the server's processes spent in it: `server_cores` (CPU seconds
    per second of wall time) and `server_cpu_ms` (CPU milliseconds per answered request), a figure that other jobs
    on the box disturb less than requests/s."""
    import psutil

    def spent() -> float:
        total = 0.0
        root = psutil.Process(pid)
        for p in [root, *root.children(recursive=True)]:
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system
        return total

    before, t0 = spent(), time.perf_counter()
    r = phase()
    cpu, wall = spent() - before, time.perf_counter() - t0
    return r | {"server_cores": cpu / wall, "server_cpu_ms": 1000 * cpu / max(1, r["requests"])}


def available_mib() -> float:
    """The machine's MemAvailable (/proc/meminfo) in MiB: its drop while a server runs is what the server costs,
    shared pages counted once (noisy where other jobs run)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def memory(pid: int) -> dict[str, float]:
    """RSS and PSS in MiB, summed over the process and its children."""
    import psutil

    root = psutil.Process(pid)
    rss = pss = 0
    for p in [root, *root.children(recursive=True)]:
        try:
            info = p.memory_full_info()
        except psutil.Error:
            continue
        rss, pss = rss + info.rss, pss + info.pss
    return {"rss": rss / 2**20, "pss": pss / 2**20}


if __name__ == "__main__":
    main()
