"""Generate the small bundled demo corpus: a PDF report, a poster image, a slide video and a markdown note.

Everything is synthetic and made here (fictional company "Aurora Robotics"), so it is free to redistribute.
The same functions build throwaway corpora for the tests.

    python -m assets.make_corpus            # writes assets/corpus/
    python -m assets.make_corpus --out DIR

What it leaves out on purpose: realism of layout. The point is that every modality and every tool has
something to find: a table and a chart in the PDF, small print on the poster, text that changes over
time in the video.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

HERE = Path(__file__).resolve().parent

REPORT_PAGES = [
    (
        "Aurora Robotics Annual Report 2025",
        "Aurora Robotics builds autonomous warehouse robots. In 2025 total revenue reached 48.6 million dollars, "
        "up 31 percent from 2024. The company shipped 1,240 robots and opened a new factory in Tampere, Finland. "
        "Chief executive Mira Lindqvist said the Falcon X2 picker drove most of the growth.",
    ),
    ("Revenue by region", None),
    ("Robots shipped per quarter", None),
    (
        "Outlook for 2026",
        "For 2026 the board expects revenue between 60 and 65 million dollars. The main risks are battery supply "
        "and longer sales cycles in North America. Research spending will rise to 9.5 million dollars, focused on "
        "the Heron drone inventory scanner, due to launch in the third quarter of 2026.",
    ),
]
REGIONS = [("Europe", 21.4), ("North America", 15.9), ("Asia Pacific", 8.7), ("Latin America", 2.6)]
QUARTERS = [("Q1", 240), ("Q2", 285), ("Q3", 330), ("Q4", 385)]
SLIDES = [
    ("Falcon X2 launch", "Picks 600 items per hour"),
    ("Battery upgrade", "Runtime extended to 14 hours"),
    ("Heron drone preview", "Scans 10,000 shelf labels per shift"),
]


def font(size: int) -> ImageFont.FreeTypeFont:
    """DejaVu Sans from matplotlib's own data folder, so it exists wherever VimRAG is installed."""
    import matplotlib

    return ImageFont.truetype(str(Path(matplotlib.get_data_path()) / "fonts/ttf/DejaVuSans.ttf"), size)


def make_report(path: Path) -> Path:
    """A 4-page PDF with a real text layer: prose, a table and a bar chart."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    with PdfPages(path) as pdf:
        for title, body in REPORT_PAGES:
            fig = plt.figure(figsize=(8.27, 11.69))  # A4
            fig.text(0.08, 0.93, title, fontsize=20, weight="bold")
            if body:
                import textwrap

                fig.text(0.08, 0.86, "\n".join(textwrap.wrap(body, 80)), fontsize=11, va="top")
            if title == "Revenue by region":
                ax = fig.add_axes([0.1, 0.5, 0.8, 0.3])
                ax.axis("off")
                ax.table(
                    cellText=[[r, f"{v:.1f}"] for r, v in REGIONS],
                    colLabels=["Region", "Revenue 2025 (million USD)"],
                    loc="center",
                )
                fig.text(0.08, 0.45, "Europe remained the largest market, with 44 percent of revenue.", fontsize=11)
            if title == "Robots shipped per quarter":
                ax = fig.add_axes([0.12, 0.45, 0.76, 0.38])
                ax.bar([q for q, _ in QUARTERS], [n for _, n in QUARTERS], color="#3b7dd8")
                ax.set_ylabel("robots shipped")
                ax.set_title("Quarterly shipments 2025")
                fig.text(0.08, 0.38, "Shipments grew every quarter; Q4 set a record.", fontsize=11)
            pdf.savefig(fig)
            plt.close(fig)
    return path


def make_poster(path: Path, size=(1600, 1000)) -> Path:
    """A poster whose footnote is too small to read without zooming."""
    im = Image.new("RGB", size, (250, 250, 245))
    d = ImageDraw.Draw(im)
    d.text((60, 60), "Aurora Robotics at LogiMAT 2026", font=font(64), fill=(20, 40, 90))
    d.text((60, 180), "Hall 4, Booth B21 - live Falcon X2 demos every hour", font=font(36), fill=(30, 30, 30))
    d.rectangle((60, 260, 1540, 820), outline=(20, 40, 90), width=4)
    d.text((100, 300), "Meet the team", font=font(44), fill=(20, 40, 90))
    d.text((100, 380), "Ask about the 2026 Heron drone pilot programme", font=font(32), fill=(40, 40, 40))
    d.text(
        (60, 940),
        "Footnote: pilot places are limited to 12 customers; apply before 15 March 2026 "
        "at aurora-robotics.example/pilot",
        font=font(14),
        fill=(90, 90, 90),
    )
    im.save(path)
    return path


def make_video(path: Path, seconds_per_slide: float = 10.0, fps: int = 5, size=(640, 360)) -> Path:
    """An mp4 of title slides, each shown for `seconds_per_slide`, so the text depends on the time."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        for title, line in SLIDES:
            im = Image.new("RGB", size, (15, 30, 60))
            d = ImageDraw.Draw(im)
            d.text((40, 110), title, font=font(40), fill=(255, 255, 255))
            d.text((40, 190), line, font=font(28), fill=(200, 220, 255))
            arr = np.asarray(im)
            for _ in range(int(seconds_per_slide * fps)):
                for packet in stream.encode(av.VideoFrame.from_ndarray(arr, format="rgb24")):
                    container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def make_note(path: Path) -> Path:
    path.write_text(
        "# Field notes: Tampere factory visit\n\n"
        "The Tampere factory opened in June 2025 and employs 85 people. It assembles the Falcon X2 picker.\n\n"
        "## Quality\n\nThe defect rate fell from 2.1 percent to 0.8 percent after the new calibration rig.\n\n"
        "## Next steps\n\nA second assembly line is planned for early 2026, doubling capacity to 3,000 robots "
        "per year.\n",
        encoding="utf-8",
    )
    return path


def make_corpus(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    return [
        make_report(out / "aurora_annual_report_2025.pdf"),
        make_poster(out / "logimat_poster.png"),
        make_video(out / "product_update.mp4"),
        make_note(out / "tampere_factory_notes.md"),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(HERE / "corpus"))
    for p in make_corpus(Path(ap.parse_args().out)):
        print(f"{p}  {p.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
