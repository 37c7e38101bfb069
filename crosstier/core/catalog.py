"""Dataset names -> paths under the output folder: the one place that knows the layout."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TABLES = ("memories", "relationships", "tier_distribution", "tier_links", "rejects", "runs")


@dataclass(frozen=True)
class Catalog:
    root: Path

    @property
    def database(self) -> Path:
        return self.root / "correlations.duckdb"

    @property
    def parquet_dir(self) -> Path:
        return self.root / "parquet"

    def parquet(self, table: str) -> Path:
        return self.parquet_dir / f"{table}.parquet"

    @property
    def manual_dir(self) -> Path:
        return self.root / "manual"

    @property
    def manual_log(self) -> Path:
        return self.manual_dir / "relationships.jsonl"

    @property
    def reports_dir(self) -> Path:
        return self.root / "reports"

    @property
    def dashboard(self) -> Path:
        return self.root / "dashboard.html"

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    @property
    def embedding_cache(self) -> Path:
        return self.cache_dir / "embeddings"

    @property
    def embeddings(self) -> Path:
        """The snapshot's vectors (id, content_hash, embedding), read by retrieval."""
        return self.parquet_dir / "embeddings.parquet"
