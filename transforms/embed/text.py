"""What text of each memory is embedded: an episode's turn with its session neighbours.

Short chat turns ("yes, the staging one") carry their meaning in the turns around them,
so an episodic memory with a session is embedded as its own content followed by its
neighbours' content (own content first: a truncating encoder keeps it). The choice and
its figures are in docs/links.md (bench/quality.py). Deterministic: neighbours are taken
in (timestamp, id) order within (namespace, session_id).
"""

from __future__ import annotations

import polars as pl

CONTEXT_BEFORE = 1
CONTEXT_AFTER = 1


def embedding_texts(memories: pl.DataFrame, *, before: int = CONTEXT_BEFORE, after: int = CONTEXT_AFTER) -> pl.DataFrame:
    """One row per memory: id and the text to embed (an episode's turn plus `before`/`after` session neighbours)."""
    frame = memories.select("id", "tier", "content", "timestamp", "session_id", "namespace").with_row_index("row")
    in_session = (pl.col("tier") == "episodic") & pl.col("session_id").is_not_null()
    ordered = frame.filter(in_session).sort("namespace", "session_id", "timestamp", "id", nulls_last=True)
    group = ["namespace", "session_id"]
    context = []
    for offset in [-k for k in range(before, 0, -1)] + list(range(1, after + 1)):
        context.append(pl.col("content").shift(-offset).over(group))
    if context:
        neighbours = pl.concat_list(context).list.drop_nulls()
        text = (
            pl.when(neighbours.list.len() > 0)
            .then(pl.concat_str([pl.col("content"), neighbours.list.join(" | ")], separator="\n"))
            .otherwise(pl.col("content"))
        )
    else:
        text = pl.col("content")
    with_context = ordered.with_columns(text.alias("text"))
    texts = frame.join(with_context.select("row", "text"), on="row", how="left")
    return texts.sort("row").select("id", pl.coalesce("text", "content").alias("text"))
