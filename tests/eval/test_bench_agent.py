"""eval/bench_agent.py's protocol table: every protocol runs the same scripted episode and its context is read
at the asked steps, with its bound."""

from __future__ import annotations

from eval.bench_agent import PROTOCOLS, context_curve, make_pages, protocol_table, smallest_note


def test_every_protocol_runs_the_long_episode_and_the_table_reads_it(tmp_path):
    units = make_pages(tmp_path, 16, size=(420, 600))
    curve = context_curve(units, 6, 2, PROTOCOLS)
    assert list(curve) == list(PROTOCOLS) and all(len(rows) == 6 for rows in curve.values())
    react = [r[1] + r[2] for r in curve["react"]]
    assert react == sorted(react) and react[-1] > 2 * react[0]  # a linear history only grows
    assert len({r[1] for r in curve["mem1"]}) == 1  # MEM1 keeps the last turn: the same pictures a step
    assert curve["vanilla"][0] == curve["vanilla"][-1]  # one call
    lines = protocol_table(curve, at=(2, 5, 20))  # steps past the episode are left out
    assert lines[0].startswith("| protocol | step 2 tokens (px) | step 5 tokens (px) | bounded by")
    assert [ln.split(" | ")[0][2:] for ln in lines[2:]] == list(PROTOCOLS)
    assert "S_total) 2,007,040 px | every step |" in lines[2]
    note = smallest_note(curve, 6)
    assert note.startswith("vimrag's step-6 context is the smallest of vimrag, vrag, react: ")
