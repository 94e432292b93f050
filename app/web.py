"""The Gradio web demo: ask about a corpus and watch the agent search, crop, zoom and remember.

    vimrag demo                         # bundled corpus, embedded default, http://127.0.0.1:7860
    vimrag demo --workdir DIR --port 7861 --backend openai --base-url URL --model M

Panels: the chat (one message per agent step, then the cited answer), the evidence gallery (crop boxes
drawn on their sources, video frames with their timestamps), the memory graph (node energies and the
pixels each item gets), the corpus (upload and index, with a progress bar), and the settings (backend,
protocol, budgets). Every question runs through the queue with a concurrency limit; Stop cancels it.
The settings are one `DemoConfig` (app/settings.py); each answered question's folder under WORKDIR/runs
holds the config it was answered with (config.json) next to its trace.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent.backends.base import PolicyConfig
from agent.events import Finished, ModelOutput
from agent.protocols import names as protocol_names
from agent.settings import default_top_k
from app.settings import BACKEND_LABELS, DemoConfig, apply_form, default_settings, describe_backend
from app.workspace import SCOPE_ALL, SCOPE_BUNDLED, SCOPE_UPLOADS, Workspace, load_questions

__all__ = ["DemoApp", "default_settings", "prepare_env", "warm_up"]

EMBEDDED_NOTE = (
    "You are running the **embedded offline default**: a deterministic controller that makes the same tool "
    "calls a VLM would (search, memorize, crop, answer), and reads a short answer of the type the question "
    "asks out of text and OCR, citing the sentence. It does not see pixels, so it is a demonstration of the "
    "machinery, not of a VLM's judgement. "
    "To use a real model, open **Settings** and choose *OpenAI-compatible endpoint* (e.g. "
    f"`vllm serve Qwen/Qwen2.5-VL-7B-Instruct`, then URL `{PolicyConfig.base_url}`) or a local "
    "*transformers* Qwen2.5-VL / Qwen3-VL path."
)
CSS = """
#graph img { object-fit: contain; }
#backend-line { font-size: 0.92em; }
footer { display: none !important; }
"""
log = logging.getLogger(__name__)
REDRAW_EVERY_S = 0.12  # the fastest the page is updated while a model streams text


class DemoApp:
    """The Blocks app and its handlers; handlers are plain methods so tests can call them directly."""

    def __init__(
        self,
        ws: Workspace,
        settings: DemoConfig | None = None,
        concurrency: int | None = None,
        questions: list[dict[str, Any]] | None = None,
    ) -> None:
        self.ws = ws
        self.settings0 = settings or DemoConfig()
        self.concurrency = self.settings0.concurrency if concurrency is None else concurrency
        self.questions = load_questions() if questions is None else questions

    # -- asking -----------------------------------------------------------------------------------
    def ask(self, question: str, history: list | None, settings: DemoConfig, scope: str):
        """Generator: (chat, gallery, graph, trace file, status) after each event worth showing."""
        import gradio as gr

        from agent.backends.base import PolicyError
        from agent.loop import Agent
        from app.views import ChatView, graph_picture, pointer_pictures, trace_json

        question = (question or "").strip()
        history = list(history or [])
        if not question:
            gr.Warning("Type a question first, or click one of the examples.")
            yield history, gr.skip(), gr.skip(), gr.skip(), gr.skip()
            return
        view = ChatView(question, history)
        try:
            pcfg = settings.policy
            cfg = replace(settings.agent, docs=self.ws.docs_for(scope))
            policy = self.ws.policy(pcfg)
        except (PolicyError, ValueError, ImportError, OSError) as e:
            view.note("Cannot start", f"{e}\n\nFix the settings or the corpus and ask again.")
            yield view.messages, gr.skip(), gr.skip(), gr.skip(), "Cannot start: fix the settings or the scope."
            return
        busy = self.ws.indexing()
        if busy is not None:  # the question would be answered as if the upload held nothing: say so first
            done, total = busy
            where = f"indexing {done} of {total} pages" if total else "starting to index"
            view.note(
                "Still indexing",
                f"The corpus is still being indexed ({where}). This answer searches the corpus as it was before "
                "this indexing job; ask again when the Corpus tab says it is done.",
            )
            yield view.messages, gr.skip(), gr.skip(), gr.skip(), f"Still indexing: {where}."
        run = self.ws.new_run(replace(settings, agent=cfg).to_dict() | {"scope": scope})
        agent = Agent(self.ws.retriever, policy, cfg)
        pics: dict[tuple, list] = {}
        redraws = 0
        gallery, graph = [], None
        last = 0.0
        lock = self.ws.model_lock(pcfg)
        if lock is not None:
            lock.acquire()
        try:
            for ev in agent.stream(question):
                changed = view.apply(ev)
                now = time.perf_counter()
                if isinstance(ev, ModelOutput) and not ev.done and now - last < REDRAW_EVERY_S:
                    continue
                if changed or graph is None:
                    gallery = self._gallery(agent.state, run, pics)
                    graph = str(run / f"graph_{redraws:03d}.png")  # a new name per redraw: never a stale cache hit
                    redraws += 1
                    graph_picture(agent.state).save(graph)
                last = now
                if isinstance(ev, Finished):
                    view.pointers(pointer_pictures(agent.state, ev.trace, run))  # where an abstention looks
                    sup = ev.trace.support or {}
                    if sup.get("table") and sup.get("answer") != "Not answerable":
                        from app.table_view import table_crop

                        view.table_picture(table_crop(sup["table"], run), sup.get("citation", ""))
                    path = run / "trace.json"
                    path.write_text(trace_json(ev.trace), encoding="utf-8")
                    status = (
                        f"{ev.trace.status.capitalize()} in {ev.trace.timings.get('total_s', 0):.1f} s, "
                        f"{len(ev.trace.steps)} steps. Export the trace with the button."
                    )
                    yield view.messages, gallery, graph, str(path), status
                    return
                yield view.messages, gallery, graph, gr.skip(), f"Step {ev.step} · {ev.kind.replace('_', ' ')}"
        except Exception as e:  # noqa: BLE001 - a bug or a broken file must not take the session down
            log.exception("the episode failed")
            view.note(
                "Error",
                f"The agent stopped on an unexpected error: {type(e).__name__}: {e}. The corpus "
                "and the index are unaffected; ask again or change the settings.",
            )
            yield view.messages, gallery, graph, gr.skip(), "Error: the agent stopped; see the chat."
        finally:
            if lock is not None:
                lock.release()

    @staticmethod
    def _gallery(state, run: Path, cache: dict[tuple, list]) -> list[tuple[str, str]]:
        """Gallery entries as files under the run folder; a picture is drawn again only when it changed."""
        from app.views import evidence_entries, evidence_picture

        out = []
        for key, ev, item in evidence_entries(state):
            if key not in cache:
                entries = []
                for j, (img, cap) in enumerate(evidence_picture(state, ev, item)):
                    path = run / f"ev_{len(cache):03d}_{j}.jpg"
                    img.save(path, quality=88)
                    entries.append((str(path), cap))
                cache[key] = entries
            out += cache[key]
        return out

    @staticmethod
    def stop(history: list | None):
        """Stop button: the running answer is cancelled; pending steps are closed and a note added."""
        import gradio as gr

        msgs = list(history or [])
        for m in msgs:
            md = m.get("metadata") if isinstance(m, dict) else getattr(m, "metadata", None)
            if md and md.get("status") == "pending":
                md["status"] = "done"
        msgs.append(
            gr.ChatMessage(
                role="assistant",
                content="Stopped. Ask again, or ask something else.",
                metadata={"title": "Stopped", "status": "done"},
            )
        )
        return msgs, "Stopped."

    # -- settings -----------------------------------------------------------------------------------
    def apply_settings(self, *values):
        """The Settings form's values (in `apply_form`'s order), then the session's settings: validate and apply
        them; on a problem keep the old settings and say what is wrong."""
        import gradio as gr

        from agent.backends.base import PolicyError

        *form, settings = values
        try:
            new = apply_form(settings, *form)
            self.ws.policy(new.policy)  # loads the model now, so errors show here
        except (PolicyError, ValueError, ImportError, OSError) as e:
            gr.Warning(f"Settings not applied: {e}. Settings unchanged.")
            return settings, describe_backend(settings), self._note_for(settings)
        gr.Info("Settings applied.")
        return new, describe_backend(new), self._note_for(new)

    @staticmethod
    def _note_for(settings: DemoConfig):
        import gradio as gr

        return gr.update(visible=settings.policy.backend == "embedded")

    # -- corpus -------------------------------------------------------------------------------------
    def upload(self, files: list | None, progress=None):
        """Index uploaded files; returns (summary markdown, files table, cleared upload box)."""
        import gradio as gr

        paths = [f if isinstance(f, str) else getattr(f, "name", str(f)) for f in (files or [])]
        if not paths:
            gr.Warning("Choose files to upload first.")
            return "Nothing uploaded.", self.files_table(), None
        summary, problems = self.ws.add_uploads(paths, progress=True)
        lines = []
        if summary is not None:
            lines.append(
                f"Indexed {summary.units_indexed} units from {summary.files_indexed} files "
                f"({summary.unchanged} already indexed) in {summary.seconds:.1f} s; the index holds "
                f"{summary.total_units} units."
            )
        if summary is not None and summary.skipped:
            lines.append("**Skipped:**\n" + "\n".join(f"- {Path(p).name}: {why}" for p, why in summary.skipped))
        if problems:
            lines.append("**Not indexed:**\n" + "\n".join(f"- {p}" for p in problems))
            gr.Warning("Some files were not indexed: " + "; ".join(problems)[:400])
        return "\n\n".join(lines), self.files_table(), None

    def reindex_bundled(self, progress=None):
        import gradio as gr

        try:
            s = self.ws.index_bundled(progress=True)
        except (OSError, ValueError) as e:
            gr.Warning(str(e))
            return str(e), self.files_table()
        return s.format().replace("\n", "  \n"), self.files_table()

    def files_table(self):
        rows = self.ws.files()
        return [[r["file"], r["corpus"], r["kind"], r["units"], r["status"], r["reason"]] for r in rows]

    # -- the page -----------------------------------------------------------------------------------
    def build(self):
        import gradio as gr

        s0 = self.settings0
        p0, a0 = s0.policy, s0.agent
        qs = [q["question"] for q in self.questions]
        # delete_cache: every hour, drop cached copies older than 6 h, so a long-running demo stays bounded
        with gr.Blocks(title="VimRAG: multimodal deep research", delete_cache=(3600, 6 * 3600)) as demo:
            settings = gr.State(s0)
            gr.Markdown(
                "# VimRAG\nAsk about PDFs, images and videos. The agent searches, crops and zooms into "
                "evidence, keeps a graph of what it learned, and answers with citations."
            )
            backend_line = gr.Markdown(describe_backend(s0), elem_id="backend-line")
            embedded_note = gr.Markdown(EMBEDDED_NOTE, visible=p0.backend == "embedded", elem_id="embedded-note")
            with gr.Row():
                with gr.Column(scale=5):
                    chat = gr.Chatbot(
                        label="Agent",
                        height=620,
                        elem_id="chat",
                        group_consecutive_messages=False,
                        placeholder="Ask a question, or click an example below.",
                    )
                    with gr.Row():
                        question = gr.Textbox(
                            placeholder="Ask about the corpus…",
                            show_label=False,
                            scale=6,
                            elem_id="question",
                            max_lines=4,
                        )
                        ask_btn = gr.Button("Ask", variant="primary", scale=1, elem_id="ask")
                        stop_btn = gr.Button("Stop", variant="stop", scale=1, elem_id="stop")
                    examples = gr.Dataset(
                        components=[gr.Textbox(visible=False)],
                        samples=[[q] for q in qs],
                        label="Example questions",
                        type="index",
                        elem_id="examples",
                        samples_per_page=12,
                    )
                    status = gr.Markdown("", elem_id="status")
                with gr.Column(scale=4):
                    gallery = gr.Gallery(
                        label="Evidence: retrieved and memorized (★), crops boxed in red",
                        columns=4,
                        height=300,
                        elem_id="evidence",
                        object_fit="contain",
                        interactive=False,
                    )
                    graph = gr.Image(
                        label="Memory graph: node energy and the pixels each item keeps",
                        type="filepath",
                        elem_id="graph",
                        interactive=False,
                        height=420,
                    )
                    trace_file = gr.DownloadButton("Export trace (JSON)", value=None, elem_id="export")
            with gr.Accordion("Corpus", open=False, elem_id="corpus"):
                scope = gr.Radio(
                    [SCOPE_ALL, SCOPE_BUNDLED, SCOPE_UPLOADS], value=SCOPE_ALL, label="Search in", elem_id="scope"
                )
                with gr.Row():
                    files = gr.File(
                        label=f"Upload PDFs, images, videos or text (at most {self.ws.max_upload_mb} MB each)",
                        file_count="multiple",
                        elem_id="upload",
                        file_types=[".pdf", "image", "video", ".txt", ".md", ".markdown", ".rst"],
                    )
                    with gr.Column():
                        upload_btn = gr.Button("Add to the index", variant="primary", elem_id="upload-btn")
                        bundled_btn = gr.Button("Re-index the bundled corpus", elem_id="bundled-btn")
                index_summary = gr.Markdown("", elem_id="index-summary")
                table = gr.Dataframe(
                    self.files_table(),
                    headers=["file", "corpus", "kind", "units", "status", "reason"],
                    interactive=False,
                    elem_id="files",
                    wrap=True,
                )
            with gr.Accordion("Settings", open=False, elem_id="settings"):
                with gr.Row():
                    backend = gr.Radio(
                        list(BACKEND_LABELS),
                        label="Backend",
                        elem_id="backend",
                        value=next((k for k, v in BACKEND_LABELS.items() if v == p0.backend), None),
                    )
                    protocol = gr.Dropdown(
                        list(protocol_names()), value=a0.protocol, label="Protocol", elem_id="protocol"
                    )
                with gr.Row(visible=p0.backend == "openai") as endpoint_row:
                    base_url = gr.Textbox(p0.base_url, label="Endpoint URL (OpenAI-compatible)", elem_id="base-url")
                    model = gr.Textbox(p0.model if p0.backend == "openai" else "", label="Model name")
                    api_key = gr.Textbox(p0.api_key, label="API key", type="password")
                model_path = gr.Textbox(
                    p0.model if p0.backend == "transformers" else "",
                    visible=p0.backend == "transformers",
                    label="Local transformers model (folder or cached HF id)",
                )
                with gr.Row():
                    max_steps = gr.Slider(1, 40, value=a0.max_steps, step=1, label="Max steps")
                    s_total = gr.Number(
                        a0.s_total, label="Pixel budget of the visual memory", precision=0, minimum=200_704
                    )
                    k0 = a0.top_k or default_top_k(p0.backend != "embedded")
                    top_k = gr.Slider(1, 10, value=k0, step=1, label="Results per search (top-k)")
                apply_btn = gr.Button("Apply settings", elem_id="apply")

            # asking, from the box or from an example: one queue, so at most `concurrency` episodes run at once
            asking = dict(
                fn=self.ask,
                inputs=[question, chat, settings, scope],
                outputs=[chat, gallery, graph, trace_file, status],
                concurrency_limit=self.concurrency,
                concurrency_id="agent",
            )
            ask_evt = gr.on([ask_btn.click, question.submit], **asking, api_name="ask")
            ask_evt.then(lambda: "", None, question, api_visibility="private")
            ex_evt = examples.click(lambda i: qs[i], examples, question, api_visibility="private").then(
                **asking, api_visibility="private"
            )
            stop_btn.click(self.stop, chat, [chat, status], cancels=[ask_evt, ex_evt], queue=False, api_name="stop")
            backend.change(
                lambda b: (
                    gr.update(visible=BACKEND_LABELS[b] == "openai"),
                    gr.update(visible=BACKEND_LABELS[b] == "transformers"),
                ),
                backend,
                [endpoint_row, model_path],
                api_visibility="private",
                queue=False,
            )
            apply_btn.click(
                self.apply_settings,
                [backend, base_url, model, api_key, model_path, protocol, max_steps, s_total, top_k, settings],
                [settings, backend_line, embedded_note],
                api_name="apply_settings",
            )

            def _upload(fs, progress=gr.Progress(track_tqdm=True)):
                return self.upload(fs, progress)

            def _bundled(progress=gr.Progress(track_tqdm=True)):
                return self.reindex_bundled(progress)

            upload_btn.click(
                _upload,
                files,
                [index_summary, table, files],
                concurrency_limit=1,
                concurrency_id="index",
                api_name="upload",
            )
            bundled_btn.click(
                _bundled,
                None,
                [index_summary, table],
                concurrency_limit=1,
                concurrency_id="index",
                api_name="index_bundled",
            )
            demo.load(self.files_table, None, table, api_name="files")
        demo.queue(max_size=64, default_concurrency_limit=self.concurrency)
        return demo

    def launch(self, host: str | None = None, port: int | None = None, **kw):
        """Serve on `host`:`port` (default: the config's)."""
        import gradio as gr

        demo = self.build()
        demo.launch(
            server_name=host or self.settings0.host,
            server_port=port or self.settings0.port,
            allowed_paths=self.ws.served_roots(),
            max_file_size=f"{self.ws.max_upload_mb}mb",
            show_error=True,
            css=CSS,
            theme=gr.themes.Soft(),
            footer_links=[],
            **kw,
        )
        return demo


def prepare_env(ws: Workspace) -> None:
    """Offline, no telemetry, and Gradio's file cache inside the workdir (so only it and the corpus are served)."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("GRADIO_TEMP_DIR", str(ws.cache))


def add_parser(sub) -> None:
    from agent.config import add_command

    add_command(sub, "demo", DemoConfig, cmd_demo, "the web demo (Gradio) on 127.0.0.1:7860", quiet=False)


def cmd_demo(args: argparse.Namespace) -> int:
    """Serve the web demo. The bundled corpus is indexed into WORKDIR/index at start (only new or changed files),
    so the first question works offline."""
    from agent.config import from_args
    from app.workspace import BUNDLED

    cfg = from_args(DemoConfig, args)
    ws = Workspace(
        Path(cfg.workdir),
        corpus=Path(cfg.corpus) if cfg.corpus else BUNDLED,
        max_upload_mb=cfg.max_upload_mb,
        keep_runs=cfg.keep_runs,
        search_url=cfg.search_url,
    )
    prepare_env(ws)
    if cfg.search_url:
        print(f"searching the server at {cfg.search_url} (the bundled corpus and uploads are not indexed here)")
    elif cfg.bundled:
        print(f"indexing the bundled corpus {ws.corpus} into {ws.index_dir}")
        print(ws.index_bundled(progress=True).format())
    app = DemoApp(ws, cfg)
    if cfg.warmup:
        warm_up(app, cfg)
    print(f"serving on http://{cfg.host}:{cfg.port}  (Ctrl-C to stop)")
    try:
        app.launch(cfg.host, cfg.port)
    finally:
        ws.close()
    return 0


def warm_up(app: DemoApp, settings: DemoConfig) -> None:
    """Load the model (and the embedded policy's SmolLM2 and OCR) before the first visitor waits for it."""
    t0 = time.perf_counter()
    policy = app.ws.policy(settings.policy)
    if settings.policy.backend == "embedded":
        print("loading the embedded SmolLM2 (the first run converts its weights once, ~10 s on 2 cores)")
        _ = policy.lm, policy.ocr
    app.ws.retriever.refresh()
    app.ws.retriever.search("warm up", k=1)
    print(f"model and index ready in {time.perf_counter() - t0:.1f} s")
