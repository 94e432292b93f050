"""Benchmark scoped search on the gym: the expert's traces with each search's allowed units found by a scan of every
unit (`Filters.accepts` on each, the way the retriever did it before 2026-11-27) against `_State.allowed` (looked
up by file name, remembered per filter), back to back and alternating, on one gym index.

Every gym episode, expert or model, searches with a filter on its environment's document, so this cost is paid at
every search of the SFT traces, the RL rollouts and the held-out evaluation. Both ways give the same traces (the
same allowed positions: tests/retrieval/test_retriever.py checks them against the scan).

    python -m rl.experiment --seeds 0 --out runs/rl_experiment     # a gym index (or any rl.experiment folder)
    python -m rl.bench_scoped_search --run runs/rl_experiment      # 40 environments, 120 questions, 2 repeats
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> dict:
    import numpy as np

    from retrieval.retriever import Retriever
    from retrieval.units import Filters
    from rl.gym import make_env
    from rl.gym_agents import expert_traces

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="an rl.experiment folder holding gym/index")
    ap.add_argument("--envs", type=int, default=40, help="training environments whose 3 questions the expert answers")
    ap.add_argument("--repeats", type=int, default=2, help="measurements each way")
    args = ap.parse_args(argv)
    index = Path(args.run) / "gym" / "index"
    if not index.is_dir():
        raise SystemExit(f"no gym index at {index}; run `python -m rl.experiment --seeds 0 --out {args.run}` first")
    retriever = Retriever(index)
    envs = [make_env(s, "train", hops=(1, 2), varied=True, noise=0.5) for s in range(args.envs)]
    pairs = [(e, q) for e in envs for q in e.questions]
    retriever.search("warm up", k=1)
    if not all(len(retriever._state.allowed(Filters(docs=[e.doc]))) for e in envs):
        raise SystemExit(f"{index} does not hold rl.experiment's default training environments; make one with them")

    def scan(self, st, filters):  # the baseline: every unit, every search
        if filters is None or filters.is_empty():
            return None
        return np.array([i for i, u in enumerate(st.units) if filters.accepts(u)], dtype=np.int64)

    looked_up = Retriever._allowed
    times: dict[str, list[float]] = {"scan": [], "lookup": []}
    saved: dict[str, int] = {}
    try:
        for _ in range(args.repeats):
            for name, fn in (("scan", scan), ("lookup", looked_up)):
                Retriever._allowed = fn
                retriever._state._allowed.clear()  # each measurement starts with nothing remembered
                with tempfile.TemporaryDirectory() as tmp:
                    t0 = time.perf_counter()
                    saved[name] = expert_traces(pairs, retriever, Path(tmp))
                    times[name].append(time.perf_counter() - t0)
                took = times[name][-1]
                print(f"{name:>6}: {len(pairs)} expert episodes, {saved[name]} saved, {took:.1f} s", flush=True)
    finally:
        Retriever._allowed = looked_up
    ratio = min(times["scan"]) / min(times["lookup"])
    print(
        f"expert traces with scoped search: scan {min(times['scan']):.1f} s, lookup {min(times['lookup']):.1f} s "
        f"(best of {args.repeats}): {ratio:.1f}x; traces saved: {saved['scan']} and {saved['lookup']}"
    )
    return {"times": times, "ratio": ratio, "saved": saved}


if __name__ == "__main__":
    main()
