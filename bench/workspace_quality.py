"""Link quality on an agent workspace (or a whole config): what a reviewer meets.

Runs extract, terms, embed (the configured model, offline), score and the cap as a run
does, then reports: files under memory/ skipped (no memory and no reject names them),
orphans, links joining identical text, contradictions per 1,000 memories (and between
identical texts), and the share of skills linked (and of skills named in a memory that link
to it).

    python bench/workspace_quality.py tests/fixtures/openclaw_workspace
    python bench/workspace_quality.py --config correlator.toml
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from pathlib import Path

import polars as pl


def _memory_files(root: Path) -> list[str]:
    memory = root / "memory"
    return sorted(p.relative_to(root).as_posix() for p in memory.rglob("*.md")) if memory.is_dir() else []


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s]", " ", text.lower())).strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workspace", nargs="?", help="a markdown workspace folder")
    parser.add_argument("--config", help="a correlator.toml (all its stores) instead of one workspace")
    parser.add_argument("--links", action="store_true", help="print every link with both texts")
    args = parser.parse_args()

    from crosstier.core.config import Settings, StoreConfig, load_settings
    from crosstier.transforms.embed.text import embedding_texts
    from crosstier.transforms.embed.vectors import shared_encoder
    from crosstier.transforms.link import links as links_mod
    from crosstier.transforms.link.terms import with_terms
    from crosstier.transforms.stores.extract import combined_extracts, extract_store

    if args.config:
        settings: Settings = load_settings(args.config)
        stores = list(settings.stores)
    else:
        settings = load_settings(None)
        stores = [StoreConfig(name="ws", kind="markdown", path=str(Path(args.workspace).resolve()))]
    extracted = combined_extracts([extract_store(s, settings.max_content_bytes) for s in stores])
    memories = with_terms(extracted.memories)
    texts = embedding_texts(memories)
    encoder = shared_encoder(settings.embedding.model, device="cpu")
    vectors = encoder.encode(texts["text"].to_list())
    scoring = settings.scoring
    scored = pl.concat([
        links_mod.scored_links(group.drop("_row"), vectors[group["_row"].to_numpy()], scoring)
        for _, group in memories.with_row_index("_row").group_by("namespace", maintain_order=True)
    ])
    cap_params = inspect.signature(links_mod.capped_links).parameters
    if "memories" in cap_params:
        capped = links_mod.capped_links(scored, scoring.max_links_per_memory, memories, tau_days=scoring.tau_days)
    else:
        capped = links_mod.capped_links(scored, scoring.max_links_per_memory)

    # files under memory/ that neither became a memory nor a reject
    skipped = []
    for store in stores:
        if store.kind != "markdown":
            continue
        root = Path(store.path)
        named = " ".join(extracted.memories.filter(pl.col("store") == store.name)["location"].to_list()
                         + extracted.rejects.filter(pl.col("store") == store.name)["location"].to_list())
        skipped += [f for f in _memory_files(root) if f not in named]

    content = dict(zip(memories["id"].to_list(), memories["content"].to_list()))
    norm = {k: _norm(v) for k, v in content.items()}
    linked = set(capped["source_id"].to_list()) | set(capped["target_id"].to_list())
    n = memories.height
    chain = capped.filter(pl.col("reason").str.starts_with("Carried forward"))
    identical = capped.filter(pl.Series([norm[a] == norm[b] for a, b in zip(capped["source_id"], capped["target_id"])], dtype=pl.Boolean))
    contradictions = capped.filter(pl.col("relationship_type") == "contradicts")
    contra_identical = contradictions.filter(pl.Series([norm[a] == norm[b] for a, b in zip(contradictions["source_id"], contradictions["target_id"])], dtype=pl.Boolean))
    skills = memories.filter(pl.col("tier") == "procedural")["id"].to_list()
    skills_linked = [s for s in skills if s in linked]
    # skills named by a memory (folder name with a hyphen, or path skills/<x>) and whether that pair links
    named_pairs, named_linked = 0, 0
    pairs = set(zip(capped["source_id"], capped["target_id"])) | set(zip(capped["target_id"], capped["source_id"]))
    for skill in skills:
        meta = json.loads(memories.filter(pl.col("id") == skill)["metadata"][0] or "{}")
        folder = Path(meta.get("file", "")).parent.name
        if not folder or ("-" not in folder and "/" not in folder):
            continue
        for mem_id, text in content.items():
            if mem_id != skill and re.search(rf"(?<![\w-]){re.escape(folder)}(?![\w-])", text, re.IGNORECASE):
                named_pairs += 1
                named_linked += (mem_id, skill) in pairs
    figures = {
        "memories": n,
        "rejects": extracted.rejects.height,
        "files_skipped": len(skipped),
        "links": capped.height,
        "orphans": n - len(linked & set(content)),
        "identical_link_share": round(identical.height / max(1, capped.height), 3),
        "identical_links_not_carried_forward": identical.height - chain.filter(
            pl.Series([norm[a] == norm[b] for a, b in zip(chain["source_id"], chain["target_id"])], dtype=pl.Boolean)).height,
        "contradictions": contradictions.height,
        "contradictions_per_1000": round(1000 * contradictions.height / max(1, n), 1),
        "contradictions_identical": contra_identical.height,
        "skills": len(skills),
        "skills_linked_share": round(len(skills_linked) / max(1, len(skills)), 2),
        "named_skill_pairs": named_pairs,
        "named_skill_pairs_linked": named_linked,
    }
    for path in skipped:
        print(f"skipped: {path}")
    for row in (capped if args.links else []).iter_rows(named=True) if args.links else ():
        print(f"{row['relationship_type']:<17} {row['score']:.2f} {content[row['source_id']][:60]!r} -> {content[row['target_id']][:60]!r} ({row['reason']})")
    for row in contradictions.iter_rows(named=True):
        print(f"contradicts: {content[row['source_id']][:70]!r} <> {content[row['target_id']][:70]!r} ({row['reason']})")
    print("command: python bench/workspace_quality.py " + " ".join(sys.argv[1:]))
    print("RESULT " + " ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
