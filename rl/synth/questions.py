"""`vimrag synth questions`: verified questions from an index or a corpus, resumable, with a dataset card.

    vimrag synth questions --index bench_out/mmlb_idx --n 300 --out runs/synth/mmlb
    vimrag synth questions --corpus my_pdfs/ --out runs/synth/mine --generator-url http://127.0.0.1:8000/v1

The run samples slots from the index in a fixed order (its seed): single pages, images or video clips, page
pairs (`pairs`; offline, two related pages of one document; an endpoint may also get two documents, `cross_doc`),
and, offline, a share of slots on the pages with tables (`tables`). A writer (offline rules, rl/synth/offline.py, or an
endpoint, rl/synth/endpoint.py) drafts one question per slot; the verifier's checks (rl/synth/checks.py) decide
whether it is kept. Every slot's outcome, kept or rejected with its reason, is appended to OUT/journal.jsonl and
fsync'd before the next begins, so a crash or `kill -9` loses at most the slot in flight, and a rerun goes on
from the journal: no item is lost or written twice. When `n` items are kept (or the slots run out), the outputs
are rewritten from the journal (rl/synth/card.py):

    OUT/questions.jsonl     kept items, our JSONL eval schema (`vimrag eval --dataset jsonl:...`, `vimrag train`)
    OUT/rejected.jsonl      rejected items, each with its verdicts and the reason
    OUT/card.md, card.json  counts by type, hops, difficulty and rejection reason, with sample items
    OUT/vrag_train.parquet  VRAG-RL's training parquet (needs pyarrow: pip install 'vimrag[train]')

Left out on purpose: evolving items toward what a policy cannot yet do (`vimrag synth difficulty`,
rl/synth/trajectories.py, measures the pass rate a curriculum would pick from; the selection is the trainer's).
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agent.config import Config, setting
from rl.synth import checks, doc_names, offline
from rl.synth.card import write_outputs
from rl.synth.items import CHECKS, Item
from rl.synth.offline import TYPES, Draft
from rl.synth.pairs import PAIRABLE, topics_of
from rl.synth.verdicts import verify

DEFAULT_OUT = "runs/synth/questions"


@dataclass
class EndpointConfig(Config):
    """An OpenAI-compatible endpoint; off while base_url is empty."""

    config_name = "endpoint"

    base_url: str = setting(
        "", "OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1 (empty: offline)", aliases=["url"]
    )
    model: str = setting("", "model name (empty: the first one the server lists)")
    api_key: str = setting("", "API key", secret=True, aliases=["key"])
    images: bool = setting(True, "send page images (--no-...-images for a text-only model)")
    max_tokens: int = setting(1024, "most tokens one reply may have (a thinking model needs more)")


@dataclass
class SynthConfig(Config):
    """What to sample, who writes and who verifies, and where it goes."""

    config_name = "synth"

    index: str = setting("", "index folder to sample from (built from --corpus first when given)")
    corpus: str = setting("", "documents to index before sampling (into --index, default OUT/index)")
    out: str = setting(DEFAULT_OUT, "output folder (rerun with the same one to resume)")
    n: int = setting(300, "stop once this many items are kept")
    seed: int = setting(0, "the order slots are sampled in")
    pairs: float = setting(0.2, "share of slots that are two pages (multi-page, two-hop questions)")
    cross_doc: float = setting(0.25, "share of page pairs taken from two documents (an endpoint's; offline: none)")
    tables: float = setting(0.3, "share of slots asking about the pages with tables (offline rules)")
    max_slots: int = setting(0, "give up after this many slots (0: 40 per wanted item)")
    concurrency: int = setting(4, "slots in flight at once with an endpoint (offline: 1)")
    generator: EndpointConfig = setting(factory=EndpointConfig, help="the writer", flag_prefix="generator-")
    verifier: EndpointConfig = setting(
        factory=EndpointConfig,
        help="the verifier (default: the generator's endpoint, else offline)",
        flag_prefix="verifier-",
    )

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"--n must be at least 1, got {self.n}")
        if not all(0 <= x <= 1 for x in (self.pairs, self.cross_doc, self.tables)):
            raise ValueError("--pairs, --cross-doc and --tables are shares between 0 and 1")


class SynthError(ValueError):
    """The run cannot start or go on; the message names the problem and the fix."""


# -- the corpus as pages -------------------------------------------------------------------------------
@dataclass
class Corpus:
    units: list[Any]  # retrieval.units.Unit, in index order
    headers: dict[str, set[str]]  # per source file: its running header and footer lines
    decks: set[str]  # sources that are slide decks (landscape pages)
    index: Path
    vocab: offline.Vocab = offline.EMPTY
    names: dict[str, str] = field(default_factory=dict)  # per source file: its document's own name, or ''
    _drafts: dict[int, list[Draft]] = field(default_factory=dict)

    def drafts(self, i: int) -> list[Draft]:
        """Every draft the offline rules read off unit `i` (computed once)."""
        if i not in self._drafts:
            u = self.units[i]
            unit = u.to_dict() | {"name": u.name, "doc_title": self.names.get(u.source, "")}
            headers = self.headers.get(u.source, set())
            self._drafts[i] = offline.page_drafts(unit, u.text or "", headers, u.source in self.decks, self.vocab)
        return self._drafts[i]

    def page(self, unit, image: bool = False) -> dict[str, Any]:
        """What a writer and a verifier see of one unit."""
        d = unit.to_dict() | {"name": unit.name, "doc_title": self.names.get(unit.source, "")}
        out = {"unit": d, "text": unit.text or "", "cite": unit.citation(), "file": unit.doc or unit.name}
        out["page"] = unit.page
        if image:
            try:
                if unit.modality == "video":  # a clip is shown as its keyframes (at most four)
                    frames = unit.load_frames(unit.keyframes[:4] or None, max_pixels=401_408)
                    out["images"] = [im for _, im in frames]
                elif unit.modality in ("page", "image"):
                    out["images"] = [unit.load_image(max_pixels=1_003_520)]
            except Exception as e:  # noqa: BLE001 - a page that cannot be rendered is shown as text only
                out["images"] = []
                out["image_error"] = f"{type(e).__name__}: {e}"
        return out


def open_corpus(cfg: SynthConfig, progress: bool) -> Corpus:
    from retrieval.stores import open_store

    index = Path(cfg.index or (Path(cfg.out) / "index"))
    if cfg.corpus:
        from retrieval.ingest import Indexer

        if not Path(cfg.corpus).exists():
            raise SynthError(f"the corpus {cfg.corpus} does not exist; give a folder or file of PDFs, images or videos")
        summary = Indexer(index).index([cfg.corpus], progress=progress)
        if progress:
            print(summary.format())
    if not (index / "store.sqlite").exists():
        raise SynthError(
            f"no index at {index}; build one with `vimrag index DOCS --index {index}` or pass --corpus DOCS"
        )
    _, units = open_store(index).units()
    if not units:
        raise SynthError(f"the index {index} holds no pages, images or clips; index a corpus into it first")
    if not any((u.text or "").strip() for u in units):
        raise SynthError(
            f"none of the {len(units)} units in {index} has text (no text layer and no OCR); the offline writer "
            "reads text, so re-index with OCR on (the default) or write with an endpoint (--generator-url)"
        )
    by_src: dict[str, list] = defaultdict(list)
    for u in units:
        by_src[u.source].append(u)
    headers, decks, names = {}, set(), {}
    for src, us in by_src.items():
        first = min(us, key=lambda u: (u.page or 0, u.chunk or 0, u.start or 0.0))
        names[src] = doc_names.doc_name(src, first.text or "")
        seen = Counter()
        for u in us:
            seen.update({ln.strip().lower() for ln in (u.text or "").split("\n") if ln.strip()})
        headers[src] = {ln for ln, c in seen.items() if c >= max(3, 0.3 * len(us))}
        if len(us) >= 3 and sum((u.width or 0) > (u.height or 0) for u in us) > 0.8 * len(us):
            decks.add(src)
    return Corpus(units, headers, decks, index, offline.Vocab.learn(u.text for u in units), names)


TABLE_SLOT = "@table"  # a slot key's mark: the slot asks about its page's tables


def slots(corpus: Corpus, cfg: SynthConfig, offline_rules: bool, progress: bool = False) -> list[tuple[str, list[int]]]:
    """The sample order: (key, unit positions), single units and pairs, fixed by the seed. Units are visited in a
    shuffled order, again in a new order once all were visited (a page can hold several questions), until
    `max_slots`. With the offline rules, only units they can ask about are sampled; a pair's second page is one
    of the same document whose facts share a name or words with the first's (rl/synth/pairs.py); and a share
    `tables` of the slots ask about the pages with tables, in turn (`TABLE_SLOT`): a table holds many facts on few
    pages, which a uniform draw of pages would rarely reach."""
    rng = random.Random(cfg.seed)
    units = range(len(corpus.units))
    if offline_rules:
        from tqdm.auto import tqdm

        read = tqdm(units, desc="reading pages", unit="unit", disable=not progress, leave=False)
        units = [i for i in read if corpus.drafts(i)]
        if not units:
            raise SynthError(
                f"the offline rules found nothing to ask in the {len(corpus.units)} units of {corpus.index} (they read "
                "sentences with numbers, acronyms, captions, contents lines, slide titles and tables); use an "
                "endpoint (--generator-url)"
            )
    pairable = [i for i in units if any(d.rule in PAIRABLE for d in corpus.drafts(i))] if offline_rules else list(units)
    by_src: dict[str, list[int]] = defaultdict(list)
    for i in pairable:
        by_src[corpus.units[i].source].append(i)
    sources, pair_set = sorted(by_src), set(pairable)
    topics = {i: topics_of(corpus.drafts(i)) for i in pairable} if offline_rules else {}
    tables = [i for i in units if any(d.type == "table" for d in corpus.drafts(i))] if offline_rules else []
    table_turn: list[int] = []
    drawn: Counter = Counter()
    limit = cfg.max_slots or 40 * cfg.n
    out: list[tuple[str, list[int]]] = []
    seen: set[str] = set()
    for visit in range(limit):
        order = list(units)
        rng.shuffle(order)
        tag = f"#{visit + 1}" if visit else ""
        k = 0
        while k < len(order):
            if len(out) >= limit:
                return out
            if tables and rng.random() < cfg.tables:
                if not table_turn:
                    table_turn = rng.sample(tables, len(tables))
                j = table_turn.pop()
                drawn[j] += 1
                out.append((f"{corpus.units[j].uid}{TABLE_SLOT}{drawn[j]}", [j]))
                continue
            i, k = order[k], k + 1
            src = corpus.units[i].source
            if i in pair_set and rng.random() < cfg.pairs:
                if offline_rules:  # one document, and a page whose facts share something with this one's
                    near = [j for j in by_src[src] if j != i and topics[i] & topics[j]]
                    j = rng.choice(near) if near else i
                else:
                    others = [s for s in sources if s != src]
                    other = rng.choice(others) if others and rng.random() < cfg.cross_doc else src
                    j = rng.choice(by_src[other])
                a, b = sorted((i, j))
                key = f"{corpus.units[a].uid}+{corpus.units[b].uid}{tag}"
                if j != i and key not in seen:  # a pair drawn twice in one visit is one slot
                    seen.add(key)
                    out.append((key, [a, b]))
                    continue
            out.append((corpus.units[i].uid + tag, [i]))
    return out


# -- writing one slot ----------------------------------------------------------------------------------
TYPE_CAP = 0.35  # no type may fill more than this share of the wanted items while others can be had
RULE_CAP = 0.35  # nor one offline rule (acronyms, slide titles, table cells...) more than this share of the kept


def rule_open(kept: Counter, rule: str) -> bool:
    """Whether one more item of an offline `rule` keeps it within RULE_CAP of the kept items, counted with it. The
    first item of a rule is always open (a share of one item is no share), so every rule's share of the kept set
    stays within the cap once a few rules are kept: each item was added only while its rule's share, with it,
    was within the cap, and later items only lower that share.

    >>> rule_open(Counter({"text": 9, "rule:acronym": 2, "rule:share": 7}), "acronym")
    True
    >>> rule_open(Counter({"text": 9, "rule:acronym": 2, "rule:share": 7}), "share")
    False
    """
    have = kept["rule:" + rule]
    return have == 0 or have + 1 <= RULE_CAP * (sum(kept[t] for t in TYPES) + 1)


def offline_draft(
    corpus: Corpus, idx: list[int], kept: Counter, n: int, taken: set[str], rng: random.Random, table: bool = False
) -> Draft | None:
    """One draft for a slot: of the questions its units support that no earlier slot asked and no cap has
    closed, one of the type fewest kept items have so far (`table`: of its table questions). `kept` counts kept
    items by type and by rule."""
    if len(idx) == 1:
        cands = corpus.drafts(idx[0])
        if table:
            cands = [d for d in cands if d.type == "table"]
    else:
        a, b = corpus.drafts(idx[0]), corpus.drafts(idx[1])
        cands = [d for d in (offline.pair_draft(x, y) for x in a for y in b) if d is not None]
    cands = [
        d
        for d in _unique_questions(cands)
        if d.question not in taken and kept[d.type] < TYPE_CAP * n and rule_open(kept, d.rule)
    ]
    if not cands:
        return None
    fewest = min(kept[d.type] for d in cands)
    return rng.choice([d for d in cands if kept[d.type] == fewest])


def _unique_questions(drafts: list[Draft]) -> list[Draft]:
    """Drafts whose question the page asks once: one asked twice with two answers ('The default setting is
    1000.', 'The default setting is 100.') has no single answer."""
    answers: dict[str, set[str]] = defaultdict(set)
    for d in drafts:
        answers[d.question].add(d.answer)
    seen, out = set(), []
    for d in drafts:
        if len(answers[d.question]) == 1 and d.question not in seen:
            seen.add(d.question)
            out.append(d)
    return out


# -- the run -------------------------------------------------------------------------------------------
def _writer_and_verifier(cfg: SynthConfig):
    from rl.synth.endpoint import Endpoint, EndpointVerifier, EndpointWriter

    writer = None
    if cfg.generator.base_url:
        g = cfg.generator
        writer = EndpointWriter(Endpoint(g.base_url, g.model, g.api_key, "generator", g.max_tokens, images=g.images))
    v = cfg.verifier if cfg.verifier.base_url else (cfg.generator if cfg.generator.base_url else None)
    if v is None:
        verifier = checks.OfflineVerifier()
    else:
        endpoint = Endpoint(v.base_url, v.model, v.api_key, "verifier", v.max_tokens, images=v.images)
        verifier = EndpointVerifier(endpoint)
    return writer, verifier


def estimate(cfg: SynthConfig, n_units: int, n_slots: int, writer, verifier) -> str:
    """What the run will cost, said before it starts."""
    calls = (1 if writer else 0) + (2 + checks.RIVAL_PAGES if not isinstance(verifier, checks.OfflineVerifier) else 0)
    who = f"{'endpoint' if writer else 'offline rules'} writing, {verifier.name} verifying"
    if calls == 0:
        return f"synth: {n_units} units indexed; up to {n_slots} slots, no model calls ({who})"
    return (
        f"synth: {n_units} units indexed; up to {n_slots} slots x up to {calls} model calls = at most "
        f"{n_slots * calls:,} calls ({who}); it stops once {cfg.n} items are kept"
    )


def synth_questions(cfg: SynthConfig, progress: bool = True, retriever=None) -> dict[str, Any]:
    """Run (or resume) question synthesis; returns the card's counts."""
    from tqdm.auto import tqdm

    from eval.runner import read_predictions
    from retrieval.retriever import Retriever

    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    corpus = open_corpus(cfg, progress)
    retriever = retriever or Retriever(corpus.index)
    writer, verifier = _writer_and_verifier(cfg)
    for part in (writer, verifier):
        if part is not None and hasattr(part, "endpoint"):
            part.endpoint.check()  # fail before the first page, not after an hour
    plan = slots(corpus, cfg, offline_rules=writer is None, progress=progress)
    journal = out / "journal.jsonl"
    done = read_predictions(journal, repair=True)
    (out / "config.json").write_text(json.dumps(cfg.to_dict() | {"index": str(corpus.index)}, indent=1))
    items = [Item.from_dict(r["item"]) for r in done.values() if r.get("item")]
    kept = [it for it in items if it.kept]
    if progress:
        print(estimate(cfg, len(corpus.units), len(plan), writer, verifier))
    embed = retriever.embedder.encode_texts
    kept_vecs = embed([it.question for it in kept]) if kept else np.zeros((0, 1), dtype=np.float32)
    kept_facts = {(checks.squash(it.answer[0]), json.dumps(it.evidence, sort_keys=True)): it.id for it in kept}
    want = Counter(it.type for it in kept) + Counter("rule:" + it.source.split(":")[-1] for it in kept)
    taken = {it.question for it in items}  # asked already, kept or rejected: a later visit asks something else
    todo = [(k, idx) for k, idx in plan if k not in done]
    bar = tqdm(total=cfg.n, initial=min(len(kept), cfg.n), desc="synth questions", unit="item", disable=not progress)

    def one(slot: tuple[str, list[int]], counts: Counter, asked: set[str]) -> tuple[str, Item | None, str]:
        key, idx = slot
        pages = [corpus.page(corpus.units[i], image=writer is not None and writer.endpoint.images) for i in idx]
        rng = random.Random(f"{cfg.seed}:{key}")
        try:
            table = TABLE_SLOT in key
            draft = writer.write(pages) if writer else offline_draft(corpus, idx, counts, cfg.n, asked, rng, table)
        except ValueError as e:  # MalformedReply: the slot is rejected with the reply quoted
            return key, None, f"malformed generator reply: {e}"
        if draft is None:
            return key, None, "nothing on these pages a question could be written from"
        images = getattr(getattr(verifier, "endpoint", None), "images", False)
        return key, verify(draft, pages, key, retriever, verifier, lambda u: corpus.page(u, image=images)), ""

    workers = max(1, cfg.concurrency) if writer or not isinstance(verifier, checks.OfflineVerifier) else 1
    try:
        with open(journal, "a", encoding="utf-8") as f, ThreadPoolExecutor(workers) as pool:
            for start in range(0, len(todo), workers):
                if len(kept) >= cfg.n:
                    break
                batch = todo[start : start + workers]
                counts, asked = Counter(want), set(taken)  # what every slot of this batch sees
                results = pool.map(one, batch, [counts] * len(batch), [asked] * len(batch))
                for key, item, note in results:  # in slot order
                    if item is not None and all(item.verdicts.get(c, {}).get("ok") for c in CHECKS[:-1]):
                        vec = embed([item.question])[0]
                        j, cos = checks.near_duplicate(vec, kept_vecs)
                        fact = (checks.squash(item.answer[0]), json.dumps(item.evidence, sort_keys=True))
                        if fact in kept_facts:
                            why = f"the same answer from the same page as {kept_facts[fact]}"
                            item.verdict("not_duplicate", False, why)
                        elif cos >= checks.DUPLICATE_COSINE and checks.squash(kept[j].answer[0]) == fact[0]:
                            why = f"cosine {cos:.2f} to {kept[j].id} {kept[j].question!r}, same answer"
                            item.verdict("not_duplicate", False, why)
                        else:
                            item.verdict("not_duplicate", True, f"nearest kept question at cosine {cos:.2f}")
                            kept.append(item)
                            kept_vecs = vec[None, :] if kept_vecs.size == 0 else np.vstack([kept_vecs, vec[None, :]])
                            kept_facts[fact] = item.id
                            want[item.type] += 1
                            want["rule:" + item.source.split(":")[-1]] += 1
                            bar.update(1)
                    if item is not None:
                        taken.add(item.question)
                    row = {"id": key, "item": item.to_dict() if item else None, "note": note}
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
                    if len(kept) >= cfg.n:
                        break
    finally:
        bar.close()
        for part in (writer, verifier):
            if part is not None and hasattr(part, "endpoint"):
                part.endpoint.close()
    return write_outputs(out, progress)
