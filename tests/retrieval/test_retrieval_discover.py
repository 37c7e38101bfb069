"""discover_links: the batch pipeline's scoring (crosstier.transforms.link.links.scored_links) applied to a
new memory against the snapshot, with a stand-in encoder (vectors chosen by hand)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from crosstier.core.catalog import Catalog
from crosstier.core.config import settings_from_dict
from crosstier.retrieval import discover_links
from crosstier.retrieval.errors import DiscoveryDisabledError, InvalidArgumentError
from crosstier.retrieval.testing import MEMORIES, publish_tiny

VECTOR = {m[2]: m[7] for m in MEMORIES}  # content -> the vector its memory has in the snapshot


class HandEncoder:
    """Embeds a text as the vector of the snapshot memory whose content it starts with."""

    dim = 4

    def encode(self, texts):
        out = []
        for text in texts:
            match = [v for content, v in VECTOR.items() if content.startswith(text[:30])]
            out.append(match[0] if match else (0.5, 0.5, 0.5, 0.5))
        return np.asarray(out, dtype=np.float32)


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return publish_tiny(tmp_path_factory.mktemp("warehouse"))


@pytest.fixture(autouse=True)
def hand_encoder(monkeypatch):
    monkeypatch.setattr("crosstier.retrieval.vectors.encoder", lambda model, settings, cache_dir=None: HandEncoder())


@pytest.fixture
def settings(tmp_path):
    return settings_from_dict({}, base=tmp_path, env={})


PROC1_LIKE = "How to set up PostgreSQL pgvector: install the extension, create the index and vacuum"


def test_finds_the_memory_it_repeats_with_the_pipeline_reason(out, settings):
    links = discover_links(PROC1_LIKE, tier="episodic", out=out, settings=settings)
    by_target = {l["target_id"]: l for l in links}
    assert "proc1" in by_target
    link = by_target["proc1"]
    assert link["target_tier"] == "procedural" and link["semantic"] == pytest.approx(1.0)
    assert link["score"] >= settings.scoring.min_correlation_score
    assert link["reason"].startswith("Entity match")
    # procedural -> other is generalizes; from the new episode's end it is specializes
    assert (link["relationship_type"], link["direction"]) == ("specializes", "in")
    assert [l["score"] for l in links] == sorted((l["score"] for l in links), reverse=True)


def test_search_space_limits_target_tiers(out, settings):
    links = discover_links(PROC1_LIKE, tier="episodic", search_space=["semantic"], refs=["sem1"], out=out, settings=settings)
    assert links and {l["target_tier"] for l in links} == {"semantic"}
    assert "sem1" in {l["target_id"] for l in links}  # an explicit reference always links


def test_hidden_memories_take_no_part(out, settings):
    secret = "Bob's salary review notes about pgvector budget, again"
    assert "sem-secret" in {l["target_id"] for l in discover_links(secret, tier="semantic", out=out, settings=settings)}
    for principal in ("alice", None):
        links = discover_links(secret, tier="semantic", out=out, settings=settings, principal=principal, namespace="ops")
        assert "sem-secret" not in {l["target_id"] for l in links}  # other namespace: never
    links = discover_links(secret, tier="semantic", out=out, settings=settings, principal="alice")
    assert "sem-secret" not in str(links)


def test_nothing_is_written(out, settings):
    before = sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in Path(out).rglob("*") if p.is_file())
    discover_links(PROC1_LIKE, tier="episodic", memory_id="new-ep-9", out=out, settings=settings)
    after = sorted((p.relative_to(out), p.stat().st_mtime_ns) for p in Path(out).rglob("*") if p.is_file())
    assert before == after and not Catalog(out).manual_log.exists()


def test_disabled(out, tmp_path):
    off = settings_from_dict({}, base=tmp_path, env={"AUTO_DISCOVER_ENABLED": "false"})
    with pytest.raises(DiscoveryDisabledError, match="AUTO_DISCOVER_ENABLED=false"):
        discover_links(PROC1_LIKE, tier="episodic", out=out, settings=off)


@pytest.mark.parametrize(
    "content, kwargs, match",
    [
        ("  ", {"tier": "episodic"}, "content"),
        ("x", {"tier": "working"}, "tier"),
        ("x", {"tier": "episodic", "search_space": ["dreams"]}, "search_space"),
    ],
)
def test_errors(out, settings, content, kwargs, match):
    with pytest.raises(InvalidArgumentError, match=match):
        discover_links(content, out=out, settings=settings, **kwargs)


def test_embeds_the_content_and_mixes_in_session_neighbours_as_the_pipeline_would(out, settings, monkeypatch):
    """crosstier.transforms.embed.text: each content is encoded alone; a turn in a session takes
    its neighbours' vectors in (context_vectors), a memory outside one keeps its own."""
    from datetime import datetime, timezone

    import numpy as np

    from crosstier.transforms.embed import text as embed_text

    seen, mixed = [], []

    class Recorder(HandEncoder):
        def encode(self, texts):
            seen.extend(texts)
            return super().encode(texts)

    def recording_context_vectors(frame, vectors, **kwargs):
        result = embed_text.CONTEXT_WEIGHT and original(frame, vectors, **kwargs)
        mixed.append(not np.allclose(result[-1], vectors[-1] / np.linalg.norm(vectors[-1]), atol=1e-6))
        return result

    original = embed_text.context_vectors
    monkeypatch.setattr(embed_text, "context_vectors", recording_context_vectors)
    monkeypatch.setattr("crosstier.retrieval.vectors.encoder", lambda model, settings, cache_dir=None: Recorder())
    discover_links("Index build took 40 s", tier="episodic", session_id="s1",
                   timestamp=datetime(2026, 11, 2, 11, 0, tzinfo=timezone.utc), out=out, settings=settings)
    discover_links("Index build took 40 s", tier="episodic", out=out, settings=settings)
    assert seen == ["Index build took 40 s", "Index build took 40 s"]
    assert mixed == [True, False]
