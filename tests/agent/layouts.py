"""Scripted episodes for the protocol layout tests: pictures and a video of known sizes, a retriever that returns
fixed results, one episode run through the real loop, and the mixed results (a poster, a text chunk, a 60 s video,
a slide) that the vimrag, baseline and fold layouts are read on."""

from __future__ import annotations

import numpy as np
from PIL import Image

from agent.backends.scripted import ScriptedPolicy
from agent.loop import Agent
from agent.settings import AgentConfig
from retrieval.units import Hit, Unit


def picture(folder, name, size, seed=0) -> Unit:
    rng = np.random.default_rng(seed)  # noise: JPEG cannot squeeze it, so the 38 KB rule bites
    arr = rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    path = folder / name
    Image.fromarray(arr).save(path)
    return Unit(
        uid=name,
        source=str(path),
        root=str(folder),
        modality="image",
        content_hash=name,
        text=f"picture {name}",
        width=size[0],
        height=size[1],
    )


def video(folder, seconds=60, fps=5) -> Unit:
    import av

    path = folder / "talk.mp4"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 160, 96, "yuv420p"
        for i in range(seconds * fps):
            arr = np.full((96, 160, 3), (i * 3) % 255, dtype=np.uint8)
            for packet in stream.encode(__import__("av").VideoFrame.from_ndarray(arr, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return Unit(
        uid="talk#0",
        source=str(path),
        root=str(folder),
        modality="video",
        content_hash="v",
        text="[00:00] talk",
        start=0.0,
        end=float(seconds),
        keyframes=[2.0, 30.0],
    )


class Fixed:
    """Returns the same ranked units for every query (at most k)."""

    ocr = None

    def __init__(self, units):
        self.units = units
        self.queries = []

    def search(self, query, k=3, filters=None, mode="hybrid"):
        self.queries.append((query, k))
        return [Hit(u, 1.0 - 0.01 * i, rank=i + 1) for i, u in enumerate(self.units[:k])]


def run(retriever, script, question="What does the poster say?", **cfg):
    policy = ScriptedPolicy(script=script)
    events = list(Agent(retriever, policy, AgentConfig(**cfg)).stream(question))
    return events, events[-1].trace, policy


def mixed_results(folder) -> list[Unit]:
    text = Unit(
        uid="note#0",
        source=str(folder / "note.md"),
        root=str(folder),
        modality="text",
        content_hash="t",
        text="The pilot admits 12 customers.",
        chunk=0,
    )
    return [
        picture(folder, "poster.png", (1500, 1000), seed=1),
        text,
        video(folder),
        picture(folder, "slide.png", (800, 600), seed=2),
    ]
