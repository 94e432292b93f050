"""This CPU's bf16 flags and the precision `auto` chose for each text model (retrieval/precision.py).

python -m retrieval.show_precision            # the CPU, its flags, the setting, every cached choice and why
python -m retrieval.show_precision --measure  # measure MiniLM's candidates again and cache the choice
"""

from __future__ import annotations

import argparse
from pathlib import Path

from retrieval.precision import ENV, cpu_report, load_choice, setting


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measure", action="store_true", help="measure the default text embedder's candidates again")
    args = ap.parse_args()
    cpu = cpu_report()
    print(f"CPU: {cpu.name}")
    print(f"flags: {' '.join(cpu.shown_flags()) or '(none reported)'}")
    print(f"native bf16: {'yes' if cpu.bf16_native else 'no'}; setting: {setting()} (${ENV})")
    from retrieval import onnx_text

    if args.measure:
        from retrieval.embedders import load_embedder
        from retrieval.st_embedder import choice_file, minilm_path

        choice_file(Path(minilm_path()) / "model.safetensors", cpu).unlink(missing_ok=True)
        emb = load_embedder("minilm", precision="auto")
        print(f"minilm: documents {emb.choice.documents}, queries {emb.choice.queries}: {emb.choice.reason}")
    for path in sorted((onnx_text.cache_dir() / "onnx").glob("*.precision-*.json")):
        c = load_choice(path)
        if c is not None:
            mark = "" if c.cpu == cpu.name else "  (another CPU)"
            print(f"{path.name}: documents {c.documents}, queries {c.queries}{mark}\n  {c.reason}")


if __name__ == "__main__":
    main()
