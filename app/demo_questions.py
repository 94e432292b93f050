"""Ask every demo question through the running web demo, as a browser would, and time what users see.

    python -m app.demo_questions                          # starts the app in-process on a fresh workdir
    python -m app.demo_questions --url http://127.0.0.1:7871 --out bench_out/demo_questions.jsonl
    python -m app.demo_questions --workdir /tmp/demo_ws --limit 3

Each question in assets/questions.jsonl goes to the public `/ask` endpoint with gradio_client (default
settings and scope), and the streamed updates are watched client side:

- first step s: submit -> the first chat update holding a step message (metadata title "Step N ..."),
  i.e. how long a user looks at an empty chat (queue wait included);
- answer s: submit -> the update carrying the final answer message (role assistant, no title);
- correct: `vimrag eval`'s score (`eval.answer_metrics.score_item`) of the answer text (the part before
  "**Sources**") against the gold answers is 1;
- error: a message titled "Error" / "Cannot start", a final status starting "Error", an exception from
  the endpoint, no answer message, or no answer before the deadline;
- cites / ev: the answer lists sources, and one of them is a gold evidence file.

Output files (gallery pictures, graph PNGs) are not downloaded: we time the app, not the client's copies.
Without --url the app is started in this process the way `vimrag demo` starts it (index the bundled
corpus, warm up the embedded policy, DemoApp.launch on a free loopback port) and closed at the end.
Exit code 1 when any question errored. `app.load_demo` reuses `start_app` and `ask` from here.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from tqdm import tqdm

from eval.answer_metrics import score_item
from eval.bench_server import free_port

POLL_S = 0.02  # how often a job's streamed outputs are read; the timing resolution of every figure
STEP_TITLE = re.compile(r"^\W*Step \d+")  # "💭 Step 3: thinking", "Step 3 · Crop ..." (not "Step limit")
ERROR_TITLES = ("Error", "Cannot start")
FOOTER = re.compile(r"(\d+) steps · ([\d.]+) s \(model ([\d.]+) s, retrieval ([\d.]+) s\)")


# -- the app ----------------------------------------------------------------------------------------
def start_app(workdir: str | Path | None = None, concurrency: int = 2) -> tuple[str, Callable[[], None]]:
    """Start the demo in this process on a free loopback port; returns (url, close).

    A fresh temporary workdir is made (and removed by close) when `workdir` is None.
    """
    from app.web import DemoApp, default_settings, prepare_env, warm_up
    from app.workspace import Workspace

    tmp = None if workdir else tempfile.mkdtemp(prefix="vimrag_demo_")
    ws = Workspace(Path(workdir or tmp))
    prepare_env(ws)
    t0 = time.perf_counter()
    summary = ws.index_bundled()
    print(
        f"indexed the bundled corpus in {time.perf_counter() - t0:.1f} s: {summary.total_units} units in {ws.index_dir}"
    )
    settings = default_settings()
    app = DemoApp(ws, settings, concurrency=concurrency)
    warm_up(app, settings)
    port = free_port()
    demo = app.launch("127.0.0.1", port, prevent_thread_lock=True, quiet=True)
    url = f"http://127.0.0.1:{port}/"
    print(f"app running on {url} (concurrency {concurrency})")

    def close() -> None:
        demo.close()
        ws.close()
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    return url, close


def connect(url: str):
    from gradio_client import Client

    return Client(url, verbose=False, download_files=False)


# -- one question -----------------------------------------------------------------------------------
def _title(msg: dict) -> str:
    return str((msg.get("metadata") or {}).get("title") or "")


def _text(msg: dict) -> str:
    """A chat message's text; gradio_client gives content as a list of {"type": "text", "text": ...} parts."""
    c = msg.get("content")
    if isinstance(c, str):
        return c
    if isinstance(c, dict):
        c = [c]
    return "\n".join(str(p.get("text", "")) for p in c or [] if isinstance(p, dict))


def _final_answer(chat: list[dict]) -> dict | None:
    last = chat[-1] if chat else None
    if last and last.get("role") == "assistant" and not _title(last):
        return last
    return None


def ask(client, q: dict[str, Any], deadline: float | None = None) -> dict[str, Any]:
    """Ask one demo question through `/ask` and watch the stream; returns one result row.

    Times are seconds after submit, read client side every POLL_S. `deadline` (a time.perf_counter()
    value) bounds the wait: past it the job is cancelled and the row counts as an error.
    """
    from gradio_client.utils import Status

    row: dict[str, Any] = {
        "id": q["id"],
        "needs": q.get("needs", []),
        "question": q["question"],
        "queue_s": None,
        "first_step_s": None,
        "answer_s": None,
        "latency_s": None,
        "steps": 0,
        "answer": None,
        "correct": False,
        "cites": False,
        "evidence_hit": False,
        "status": "",
        "error": "",
        "server_s": None,
        "model_s": None,
        "retrieval_s": None,
    }
    t0 = time.perf_counter()
    job = client.submit(q["question"], [], api_name="/ask")
    seen, last = 0, None
    while True:
        done = job.done()  # read before the outputs, so no output that came with the finish is missed
        outs = job.outputs()
        now = time.perf_counter() - t0
        if row["queue_s"] is None and (outs or job.status().code in (Status.PROCESSING, Status.ITERATING)):
            row["queue_s"] = now
        for out in outs[seen:]:
            chat = out[0] or []
            if row["first_step_s"] is None and any(STEP_TITLE.match(_title(m)) for m in chat):
                row["first_step_s"] = now
            if row["answer_s"] is None and _final_answer(chat):
                row["answer_s"] = now
            last = out
        seen = len(outs)
        if done:
            break
        if deadline is not None and time.perf_counter() > deadline:
            job.cancel()
            row["error"] = f"no answer within the budget ({now:.1f} s after submit)"
            break
        time.sleep(POLL_S)
    row["latency_s"] = time.perf_counter() - t0
    if not row["error"] and job.exception() is not None:
        row["error"] = f"the endpoint raised: {job.exception()}"
    return _score(row, last, q)


def _score(row: dict[str, Any], last, q: dict[str, Any]) -> dict[str, Any]:
    chat = (last[0] or []) if last else []
    row["status"] = str(last[4] or "") if last else ""
    row["steps"] = sum(1 for m in chat if STEP_TITLE.match(_title(m)))
    bad = [f"{_title(m)}: {_text(m)[:200]}" for m in chat if any(t in _title(m) for t in ERROR_TITLES)]
    final = _final_answer(chat)
    if not row["error"]:
        if bad:
            row["error"] = bad[0]
        elif row["status"].startswith("Error"):
            row["error"] = row["status"]
        elif final is None:
            row["error"] = f"the stream ended without an answer message (status {row['status']!r})"
    if final is None:
        return row
    text = _text(final)
    answer, _, sources = text.partition("**Sources**")
    row["answer"] = answer.split("<sub>")[0].strip()
    gold = {"pred": row["answer"], "gold": q.get("answer", []), "answer_format": q.get("answer_format", "")}
    row["correct"] = score_item(gold)["score"] >= 1.0
    cited = [ln for ln in sources.split("<sub>")[0].splitlines() if re.match(r"\s*\d+\.", ln)]
    row["cites"] = bool(cited)
    gold_files = {e["file"] for e in q.get("evidence", []) if e.get("file")}
    row["evidence_hit"] = any(f in ln for f in gold_files for ln in cited)
    m = FOOTER.search(text)
    if m:
        row["server_s"], row["model_s"], row["retrieval_s"] = (float(x) for x in m.groups()[1:])
    return row


# -- reporting --------------------------------------------------------------------------------------
def fmt_s(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def stats(xs: list[float | None]) -> str:
    v = sorted(x for x in xs if x is not None)
    if not v:
        return "-"
    return f"median {statistics.median(v):.1f} s, max {v[-1]:.1f} s"


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        f"\n{'id':<18} {'needs':<18} {'correct':<7} {'cites':<5} {'ev':<3} {'first step s':>12} "
        f"{'answer s':>8} {'steps':>5}  error / answer"
    )
    for r in rows:
        tail = r["error"] or (r["answer"] or "").replace("\n", " ")
        print(
            f"{r['id']:<18} {','.join(r['needs']) or '-':<18} {'yes' if r['correct'] else 'no':<7} "
            f"{'yes' if r['cites'] else 'no':<5} {'yes' if r['evidence_hit'] else 'no':<3} "
            f"{fmt_s(r['first_step_s']):>12} {fmt_s(r['answer_s']):>8} {r['steps']:>5}  {tail[:60]}"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running demo (default: start one in this process)")
    ap.add_argument("--workdir", help="workdir for the in-process app (default: a fresh temporary folder)")
    ap.add_argument("--questions", default=None, help="questions JSONL (default assets/questions.jsonl)")
    ap.add_argument("--limit", type=int, default=0, help="ask only the first N questions (quick run)")
    ap.add_argument("--timeout-s", type=float, default=300.0, help="give up on one question after this long")
    ap.add_argument("--out", help="write one JSON row per question here")
    args = ap.parse_args(argv)

    from app.workspace import QUESTIONS, load_questions

    qs = load_questions(Path(args.questions) if args.questions else QUESTIONS)
    if args.limit:
        qs = qs[: args.limit]
    if not qs:
        raise SystemExit("no questions: assets/questions.jsonl is missing or empty (pass --questions FILE)")
    url, close = (args.url, lambda: None) if args.url else start_app(args.workdir)
    rows = []
    try:
        client = connect(url)
        for q in tqdm(qs, desc="demo questions", unit="q"):
            rows.append(ask(client, q, deadline=time.perf_counter() + args.timeout_s))
    finally:
        close()
    print_table(rows)
    n = len(rows)
    errors = sum(1 for r in rows if r["error"])
    print(
        f"\nn {n} · correct {sum(r['correct'] for r in rows)}/{n} · errors {errors} · cite sources "
        f"{sum(r['cites'] for r in rows)}/{n} · cite gold evidence {sum(r['evidence_hit'] for r in rows)}/{n}"
    )
    print(f"time to first step: {stats([r['first_step_s'] for r in rows])}")
    print(f"time to answer:     {stats([r['answer_s'] for r in rows])}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        print(f"rows written to {args.out}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
