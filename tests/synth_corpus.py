"""A small corpus written for the `vimrag synth` tests: every offline rule has a statement to read, and each
statement's question has one answer, printed once.

- survey.pdf (5 portrait pages): a contents page, shares, a founding year, a count, an acronym, a table and a
  figure caption, a median and a duration;
- scanner_guide.pdf (3 landscape slides, each with a title): a press-and-hold instruction;
- depot_notes.md: a count.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

SURVEY = [
    (
        "Harbor Commuter Survey 2024",
        "Contents\nIntroduction to the survey ........ 2\nCommuting by rail ........ 3\n"
        "Travel times by district ........ 4\nSurvey methodology ........ 5",
    ),
    (
        "Introduction to the survey",
        "About 62% of commuters say the morning trains are too crowded. The Harbor Transit Panel was founded in "
        "1998. Riders were asked about fares, crowding and delays.",
    ),
    (
        "Commuting by rail",
        "There are 14 stations on the northern line. The Northern Line Authority (NLA) runs every train on it. "
        "Most riders board before eight in the morning.",
    ),
    (
        "Travel times by district",
        "Table 2: Average commute time by district\nWestfield 41 min\nOld Port 29 min\nHill Park 36 min\n"
        "The median commute was 34 minutes in 2024.",
    ),
    (
        "Survey methodology",
        "Figure 3: Share of commuters by transport mode\nA full survey interview takes about 12 minutes. "
        "Interviews were held by phone and online.",
    ),
]
SLIDES = [
    ("Charging the Scanner", "Press and hold the power button for 5 seconds to restart the scanner."),
    ("Cleaning the Lens Cover", "Wipe the cover with a dry cloth. Do not use solvents on it."),
    ("Storing the Device Safely", "Keep the device in its case when it is not in use."),
]
NOTE = "# Riverside depot\n\nThe Riverside depot has 40 electric buses. Drivers start their shifts at six.\n"


def _pdf(path: Path, pages: list[tuple[str, str]], landscape: bool = False) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    size = (11.69, 8.27) if landscape else (8.27, 11.69)
    with PdfPages(path) as pdf:
        for title, body in pages:
            fig = plt.figure(figsize=size)
            fig.text(0.08, 0.92, title, fontsize=20, weight="bold")
            lines = []
            for para in body.split("\n"):
                lines += textwrap.wrap(para, 80) if len(para) > 80 else [para]
            fig.text(0.08, 0.84, "\n".join(lines), fontsize=11, va="top")
            pdf.savefig(fig)
            plt.close(fig)
    return path


def make_synth_corpus(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    _pdf(out / "survey.pdf", SURVEY)
    _pdf(out / "scanner_guide.pdf", SLIDES, landscape=True)
    (out / "depot_notes.md").write_text(NOTE)
    return out
