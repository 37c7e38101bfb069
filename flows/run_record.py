"""Bookkeeping of one flow run, kept out of the flow body: the run id, seconds per stage,
the summary, the run log (failed runs too), the markdown report and the Prefect artifacts."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import resource
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from crosstier.core.catalog import Catalog
from crosstier.core.config import Settings
from crosstier.core.writer_lock import writer_lock
from crosstier.transforms.partitions import removed_work
from crosstier.transforms.embed.text import CONTEXT_WEIGHT, SESSION_ORDER
from crosstier.transforms.link.copies import PAIRS_INSIDE_A_GROUP
from crosstier.transforms.link.links import rules_fingerprint
from crosstier.transforms.link.calibration import load_calibration
from crosstier.transforms.publish import run_report
from crosstier.transforms.publish import snapshot as publish
from crosstier.transforms.schema import TIERS


def peak_rss_mib() -> float:
    """The flow process's peak resident memory so far, MiB (its high-water mark: read at the
    end of each stage, it shows which stage raised the run's peak). Threads of the local task
    runner count here; Dask workers are processes of their own and do not."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def calibration_label(settings: Settings) -> str:
    """Which calibration scores the links: its file (or 'bundled') and a hash of its maps."""
    calibration = load_calibration(settings.scoring.calibration)
    return f"{calibration.source} ({calibration.fingerprint})"


def settings_fingerprint(settings: Settings) -> str:
    """What every link depends on besides the memories: scoring, its calibration's maps, how
    turns take context, the embedding model, and the rules' code (links.rules_fingerprint).
    A change to any makes the next run full."""
    relevant = {"scoring": dataclasses.asdict(settings.scoring), "model": settings.embedding.model, "backend": settings.embedding.backend, "precision": settings.embedding.precision,
                "calibration": calibration_label(settings), "context": ("vectors", CONTEXT_WEIGHT, SESSION_ORDER), "copies": PAIRS_INSIDE_A_GROUP,
                "rules": rules_fingerprint()}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:16]


def previous_state(catalog: Catalog, fingerprint: str) -> dict[str, pl.DataFrame | Path] | None:
    """The last snapshot's fingerprints and vectors, the path of its pre-cap links (read by
    the columns and rows each step needs: 4.07M at 100k dense memories), its memories' terms
    and the path of their classifier evidence (each None where it has none), when it was made
    with the same settings, or None (then the run is full)."""
    files = catalog.current_snapshot()  # resolved once: record and state of the same run
    if files is None:
        return None
    record = publish.published_record(files)
    if record is None:  # a snapshot from before runs kept their record inside it
        published = [r for r in publish.run_log(catalog) if r.get("status") == "published"]
        record = published[-1] if published else {}
    if record.get("settings_fingerprint") != fingerprint:
        return None
    # embeddings: a memory whose vector moved is scored again, whatever its fingerprint says
    state: dict[str, pl.DataFrame | Path | None] = {name: publish.snapshot_table(files, name) for name in ("fingerprints", "embeddings")}
    stored = files.parquet("scored_links")
    state["scored_links"] = stored if stored.is_file() else None
    if any(value is None for value in state.values()):
        return None
    # the terms found last time, for the memories whose content and entities are the same
    # (with_terms), and by namespace for the terms common there (namespace_terms)
    state["memory_terms"] = publish.snapshot_table(files, "memories", ["namespace", "content", "entities", "terms"])
    # and the classifier's evidence, by path (each score task reads its namespace's rows); a
    # snapshot without it (the watcher's, or one from before) leaves it to be made again
    evidence = files.parquet("memory_evidence")
    state["memory_evidence"] = evidence if evidence.is_file() else None
    return state


@dataclass
class RunRecord:
    """One run's identity, previous state and running summary."""

    settings: Settings
    catalog: Catalog
    run_id: str
    started: datetime
    previous: dict[str, pl.DataFrame | Path] | None
    summary: dict[str, Any]
    stage_seconds: dict[str, float] = field(default_factory=dict)
    stage_peak_mib: dict[str, float] = field(default_factory=dict)

    @classmethod
    def start(cls, settings: Settings, full: bool) -> RunRecord:
        """A new run on the settings' warehouse: leftovers of dead runs cleared, the last
        snapshot's state loaded unless the run is full or the settings changed."""
        catalog = Catalog(settings.output_dir)
        catalog.root.mkdir(parents=True, exist_ok=True)
        publish.cleanup_leftovers(catalog)
        publish.recover(catalog)  # a run killed after its switch: its record joins the log
        run_id, started = new_run_id(), datetime.now(timezone.utc)
        fingerprint = settings_fingerprint(settings)
        previous = None if full else previous_state(catalog, fingerprint)
        summary = {"run_id": run_id, "mode": "incremental" if previous else "full", "status": "running", "started_at": started.isoformat(), "settings_fingerprint": fingerprint}
        return cls(settings, catalog, run_id, started, previous, summary)

    @property
    def cache_dir(self) -> Path:
        return Path(self.settings.embedding.cache_dir) if self.settings.embedding.cache_dir else self.catalog.cache_dir

    @property
    def work_dir(self) -> Path:
        """This run's partitions (per store, shard and namespace), read and written by its tasks."""
        return self.catalog.work_dir / self.run_id

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.stage_seconds[name] = self.stage_seconds.get(name, 0.0) + time.perf_counter() - start
            self.stage_peak_mib[name] = peak_rss_mib()

    @contextmanager
    def recorded(self) -> Iterator[None]:
        """A run that raises is appended to the run log as failed, then the error goes on.
        The run holds the warehouse's writer lock throughout: a watcher waits for it."""
        try:
            with writer_lock(self.catalog.root):
                removed_work(self.catalog.work_dir)  # partitions of runs that died
                try:
                    yield
                finally:
                    removed_work(self.work_dir)
        except BaseException as exc:
            failed = datetime.now(timezone.utc)
            self.summary.update(status="failed", error=f"{type(exc).__name__}: {exc}", finished_at=failed.isoformat(), seconds=(failed - self.started).total_seconds())
            publish.append_run_log(self.catalog, self.summary)
            raise

    def counted(self, extracted: Any, memories: pl.DataFrame, relationships: pl.DataFrame, embed_stats: dict, linked: Any) -> None:
        """The run's counts, in the summary the run log, report and runs table show."""
        self.summary.update(
            status="published",
            records_read=extracted.records_read,
            memories=memories.height,
            rejects=extracted.rejects.height,
            relationships=relationships.height,
            embedded=embed_stats["embedded"],
            cached=embed_stats["cached"],
            pairs_scored=linked.pairs_scored,
            changed=linked.changed,
            deleted=linked.deleted,
            embedding_model=self.settings.embedding.model,
            calibration=calibration_label(self.settings),
            memories_by_tier={t: int(memories.filter(pl.col("tier") == t).height) for t in TIERS},
            links_by_type=dict(Counter(relationships.get_column("relationship_type").to_list())),
        )

    def runs_table(self) -> pl.DataFrame:
        """Every run so far plus this one, as the snapshot's `runs` table."""
        finished = datetime.now(timezone.utc)
        self.summary.update(finished_at=finished.isoformat(), seconds=(finished - self.started).total_seconds(), stage_seconds=dict(self.stage_seconds),
                            stage_peak_mib=dict(self.stage_peak_mib))
        return run_report.runs_table([*publish.run_log(self.catalog), self.summary])

    def finished(self, database: Path, dashboard_built: tuple[str | None, str | None], relationships: pl.DataFrame, memories: pl.DataFrame, tier_distribution: pl.DataFrame) -> dict[str, Any]:
        """The summary, once the snapshot is out: report file and Prefect artifacts written.
        `dashboard_built` is (path, None) or (None, why not): the why is a warning of the run."""
        dashboard, missing = dashboard_built
        if missing:
            self.summary.setdefault("warnings", []).append(missing)
        self.summary["stage_seconds"] = dict(self.stage_seconds)
        self.summary["stage_peak_mib"] = dict(self.stage_peak_mib)
        self.summary["outputs"] = {"database": str(database), "parquet": str(self.catalog.parquet_dir), "dashboard": dashboard}
        report = run_report.run_report_markdown(self.summary, relationships, memories, tier_distribution, dashboard_path=dashboard)
        self.catalog.reports_dir.mkdir(parents=True, exist_ok=True)
        (self.catalog.reports_dir / "latest-run.md").write_text(report, encoding="utf-8")
        create_markdown_artifact(markdown=report, key="correlator-run-report", description=f"Correlator run {self.run_id}")
        create_table_artifact(table=tier_distribution.to_dicts(), key="correlator-tier-distribution", description="Tier distribution")
        return self.summary
