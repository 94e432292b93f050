"""A PDF page with a financial table printed without rules, the way statements and papers print them: words
placed by matplotlib at column positions, so the text layer reads a row as one line and only the word boxes
keep the columns. Shared by the table tests of retrieval/ and agent/."""

from __future__ import annotations

from pathlib import Path

ROWS = [
    ("Net sales", "2,045", "1,870"),
    ("Cost of sales", "(1,210)", "(1,150)"),
    ("Gross profit", "835", "720"),
    ("Operating income", "412", "305"),
    ("Net income", "318", "240"),
]
CAPTION = "Table 2: Consolidated statement of income (in millions, except per share data)"


def make_table_pdf(path: Path) -> Path:
    """One A4 page: a title, a sentence, the caption, a header of two years, and ROWS in three columns."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    with PdfPages(path) as pdf:
        fig = plt.figure(figsize=(8.27, 11.69))
        fig.text(0.08, 0.93, "Northwind Robotics Annual Report 2025", fontsize=18, weight="bold")
        fig.text(0.08, 0.88, "Sales grew in every region and the new plant opened in March.", fontsize=11)
        fig.text(0.08, 0.82, CAPTION, fontsize=10)
        y = 0.78
        fig.text(0.55, y, "2025", fontsize=10, ha="right")
        fig.text(0.75, y, "2024", fontsize=10, ha="right")
        for label, a, b in ROWS:
            y -= 0.025
            fig.text(0.08, y, label, fontsize=10)
            fig.text(0.55, y, a, fontsize=10, ha="right")
            fig.text(0.75, y, b, fontsize=10, ha="right")
        fig.text(0.08, y - 0.06, "The board proposes a dividend of 1.20 per share.", fontsize=11)
        pdf.savefig(fig)
        plt.close(fig)
    return path
