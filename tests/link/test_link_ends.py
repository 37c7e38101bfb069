"""Link ends as codes (transforms/link/link_ends.py): which rows touch a set of memories, as
polars' is_in over the id columns says, through filters and appends, on both coding paths."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from crosstier.transforms.link import incremental, link_ends
from crosstier.transforms.link.link_ends import IdCodes, LinkEnds, rows_apart, rows_touching


def links_frame(rng: np.random.Generator, n: int, ids: list[str]) -> pl.DataFrame:
    return pl.DataFrame({
        "source_id": [ids[i] for i in rng.integers(0, len(ids), n)],
        "target_id": [ids[i] for i in rng.integers(0, len(ids), n)],
        "score": rng.random(n),
    })


def by_is_in(frame: pl.DataFrame, ids: set[str]) -> pl.DataFrame:
    wanted = pl.Series(sorted(ids), dtype=pl.String).implode()
    return frame.filter(pl.col("source_id").is_in(wanted) | pl.col("target_id").is_in(wanted))


@pytest.mark.parametrize("vectorised_from", [10**9, 1], ids=["per-id", "vectorised"])
def test_rows_touching_equal_is_in_through_filters_and_appends(monkeypatch, vectorised_from):
    monkeypatch.setattr(link_ends, "_VECTORISED_FROM", vectorised_from)
    rng = np.random.default_rng(3)
    ids = [f"m-{i:03d}" for i in range(60)]
    frame = links_frame(rng, 400, ids[:40])
    codes = IdCodes()
    ends = LinkEnds.of(frame, codes)
    for step in range(6):
        asked = set(rng.choice(ids, 5).tolist()) | {"never-seen"}
        assert rows_touching(frame, ends, asked).equals(by_is_in(frame, asked))
        # a micro-batch: drop the rows at some memories, append rows that name new ones too
        dropped = set(rng.choice(ids, 3).tolist())
        kept, kept_ends = rows_apart(frame, ends, dropped)
        assert kept.equals(incremental.kept_links(frame, dropped))
        fresh = links_frame(rng, 30, ids[: 40 + 4 * step])
        frame = pl.concat([kept, fresh])
        ends = kept_ends.then(fresh)
    assert len(codes) <= len(ids)
    # the codes held through all of it are those a fresh coding gives, up to naming
    again = LinkEnds.of(frame, IdCodes())
    assert np.array_equal(ends.source == ends.target, again.source == again.target)
    assert rows_touching(frame, ends, set(ids)).equals(frame)


def test_an_id_keeps_its_code_after_its_rows_go():
    codes = IdCodes()
    first = codes.of(pl.Series(["a", "b", "c"]))
    assert codes.of(pl.Series(["c", "d", "a"])).tolist() == [first[2], 3, first[0]]
    assert codes.mask(["b", "zzz"]).tolist()[:4] == [False, True, False, False]
