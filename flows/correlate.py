"""The `correlate` flow: stores -> memories -> terms -> embeddings -> links -> warehouse.

Orchestration only: every task wraps one transform or one I/O step; retries sit on store
reads (I/O) alone. The flow body reads like the pipeline list of DESIGN.md."""

from __future__ import annotations

import dataclasses
import errno
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.settings import get_current_settings
from prefect.task_runners import ThreadPoolTaskRunner

from crosstier.core import manual_log
from crosstier.core.catalog import Catalog
from crosstier.core.config import EmbeddingConfig, ScoringConfig, Settings, StoreConfig, load_settings
from crosstier.flows.run_record import RunRecord
from crosstier.transforms import partitions
from crosstier.transforms.embed import vectors as embed
from crosstier.transforms.embed.text import context_vectors, embedding_texts
from crosstier.transforms.link import cap_reach, copies, incremental, links, live, namespace_terms
from crosstier.transforms.link.manual import manual_relationships, merged_relationships
from crosstier.transforms.link.terms import with_terms
from crosstier.transforms.publish import snapshot as publish
from crosstier.transforms.schema import RELATIONSHIP_SCHEMA
from crosstier.transforms.stores.extract import Extracted, ExtractError, combined_extracts, extract_store, with_vector_length

LINK_KEY = ("source_id", "target_id", "relationship_type")  # one scored link per key: the stored links' order
PERMANENT_OS_ERRORS = (errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EACCES, errno.EPERM)


def fault_point(stage: str) -> None:
    """Tests kill the run here (CTC_FAULT_STAGE=<stage>) to prove a dead run changes nothing."""
    if os.environ.get("CTC_FAULT_STAGE") == stage:
        os.kill(os.getpid(), signal.SIGKILL)


def is_transient_io_error(exc: BaseException | None) -> bool:
    """An error worth retrying: an OS or connection error anywhere in the chain, but not
    a missing or forbidden path, which will not fix itself."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and exc.errno not in PERMANENT_OS_ERRORS and not isinstance(exc, FileNotFoundError):
            return True
        if type(exc).__name__ in ("OperationalError", "InterfaceError"):  # psycopg's connection errors
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _retry_on_io(task_, task_run, state) -> bool:
    return is_transient_io_error(state.data if isinstance(state.data, BaseException) else None)


# ---------------------------------------------------------------- tasks


@task(name="extract", task_run_name="extract-{store.name}", retries=3, retry_delay_seconds=[1, 2, 4], retry_condition_fn=_retry_on_io, cache_policy=NO_CACHE)
def extract_task(store: StoreConfig, max_content_bytes: int, folder: Path) -> partitions.StorePart:
    """One store -> its memories and rejects partitions in `folder`."""
    fault_point("extract")
    result = extract_store(store, max_content_bytes)
    get_run_logger().info("store %s: %d records -> %d memories, %d rejects", store.name, result.records_read, result.memories.height, result.rejects.height)
    return partitions.StorePart.written(result, folder)


@task(name="terms", cache_policy=NO_CACHE)
def terms_task(memories: pl.DataFrame, known: pl.DataFrame | None = None) -> pl.DataFrame:
    """Each memory's terms; `known`: the last snapshot's (content, entities, terms), reused where they match."""
    fault_point("terms")
    return with_terms(memories, known)


@task(name="embed", task_run_name="embed-{shard_index}", cache_policy=NO_CACHE)
def embed_shard_task(texts_path: Path, config: EmbeddingConfig, cache_dir: Path, shard_index: int) -> tuple[Path, dict]:
    """One shard of (text_hash, text) -> its (text_hash, embedding) partition beside it."""
    fault_point("embed")
    logger = get_run_logger()
    encoder = embed.shared_encoder(config.model, device=config.device, backend=config.backend, precision=config.precision, cache_dir=cache_dir)
    vectors, stats = embed.embed_with_cache(partitions.read_frame(texts_path), encoder, cache_dir, batch_size=config.batch_size, log=logger)
    return partitions.write_frame(vectors, texts_path.with_name(f"vectors-{shard_index}.parquet")), stats.as_dict()


@task(name="score", task_run_name="score-{namespace}", cache_policy=NO_CACHE)
def score_task(namespace: str, folder: Path, scoring: ScoringConfig, focus_ids: list[str] | None, previous_evidence: Path | None = None) -> partitions.ScorePart:
    """One namespace's partition (memories.parquet, vectors.npy in `folder`) -> its stored links
    partition (links.parquet, sorted by the link key) and, in a full run (no `focus_ids`), the
    links after the cap (capped.parquet): links never cross a namespace, so its cap is the run's
    cap there, and the flow never holds the stored links (4.07M at 100k dense memories). The
    memories' classifier evidence is taken from the last snapshot's (`previous_evidence`) where
    a memory's inputs are the same (live.reused_evidence), and kept for the next run (evidence.parquet)."""
    fault_point("score")
    memories, vectors = partitions.read_frame(folder / "memories.parquet"), partitions.read_matrix(folder / "vectors.npy")
    logger = get_run_logger()
    previous = None if previous_evidence is None else partitions.namespace_rows(previous_evidence, namespace)
    evidence = live.reused_evidence(previous, memories)
    del previous
    evidence_path = partitions.write_frame(evidence, folder / "evidence.parquet")

    def progress(block: int, blocks: int, pairs: int, kept: int) -> None:
        if blocks > 1:
            logger.info("namespace %s: block %d/%d scored, %d pairs so far, %d links held (pruned to the cap's reach as they grow)", namespace, block, blocks, pairs, kept)

    parts, pairs = links.scored_link_parts(
        memories, np.asarray(vectors), scoring, focus_ids=focus_ids, within_cap=scoring.max_links_per_memory, progress=progress,
        evidence=evidence,
    )
    del evidence  # scoring holds its own frame of it
    unsorted, written = partitions.write_frames(parts, folder / "scored.parquet", RELATIONSHIP_SCHEMA)  # a part at a time
    stored = partitions.sorted_partition([unsorted], folder / "links.parquet", LINK_KEY)
    unsorted.unlink()
    capped = None
    if focus_ids is None:
        # the copy groups from the evidence's normalised texts (copy_text): hashed, not normalised again (~1.5 s at 100k)
        groups = copies.copy_groups(pl.read_parquet(evidence_path, columns=["id", "namespace", "content", "timestamp", "copy_text"]))
        kept = links.capped_links_of_partition(stored, scoring.max_links_per_memory, memories, tau_days=scoring.tau_days, groups=groups)
        capped = partitions.write_frame(kept, folder / "capped.parquet")
        logger.info("namespace %s: %d pairs scored -> %d links stored, %d after the cap", namespace, pairs, written, kept.height)
    else:
        logger.info("namespace %s: %d pairs scored -> %d links", namespace, pairs, written)
    return partitions.ScorePart(namespace, stored, capped, pairs, written, evidence_path)


@task(name="publish", cache_policy=NO_CACHE)
def publish_task(tables: dict[str, pl.DataFrame], state: dict[str, pl.DataFrame | Path], catalog: Catalog, run_id: str, record: dict[str, Any]) -> publish.Published:
    fault_point("publish")
    # a fault point after every write and rename: CTC_FAULT_STAGE="publish:<step>"
    published = publish.publish_snapshot(tables, catalog, run_id, parquet_only=state, record=record, checkpoint=lambda step: fault_point(f"publish:{step}"))
    get_run_logger().info("published %s: %s", published.database, published.rows)
    return published


@task(name="dashboard", cache_policy=NO_CACHE)
def dashboard_task(out: Path) -> tuple[str | None, str | None]:
    """(the dashboard's path, None), or (None, why it was not built) for the run report."""
    try:
        from crosstier.dashboards.build import build_dashboard
    except ModuleNotFoundError as exc:
        why = f"no dashboard: the dashboard dependency {exc.name!r} is not installed (pip install {exc.name})"
        get_run_logger().warning(why)
        return None, why
    return str(build_dashboard(out)), None


# ---------------------------------------------------------------- helpers


def extracted_stores(settings: Settings, work: Path) -> Extracted:
    """Every store's memories and rejects (one partition per store), ids checked across
    stores; a provided vector of the wrong length for the model is a reject, so one bad
    record never stops the run."""
    futures = [extract_task.submit(store, settings.max_content_bytes, work / "extract" / f"{i:04d}") for i, store in enumerate(settings.stores)]
    extracts = [f.result().read() for f in futures]
    if any(e.memories.get_column("embedding").is_not_null().any() for e in extracts if e.memories.height):
        dim = embed.model_dim(settings.embedding.model)
        extracts = [with_vector_length(e, dim) for e in extracts]
    return combined_extracts(extracts)


def embedded_memories(
    memories: pl.DataFrame, provided: tuple[np.ndarray, np.ndarray], config: EmbeddingConfig, cache_dir: Path, shard_size: int, work: Path,
) -> tuple[pl.DataFrame, np.ndarray, dict]:
    """What each memory's vector depends on (its text with session context, for fingerprints),
    and row-aligned vectors: each content encoded once (provided ones where a store gave them:
    `provided`, embed.provided_matrix's rows and matrix, which this spends; the rest from the
    cache or the model, mapped over shards), then a session turn's context mixed in from its
    neighbours' vectors. The vectors are one float32 matrix filled in place (a million provided
    ones went through five copies as frames of lists: 13.7 GB in the flow)."""
    dim = embed.model_dim(config.model)
    texts = embedding_texts(memories).with_columns(text_hash=pl.col("text").map_elements(embed.text_hash, return_dtype=pl.String))
    positions, provided = provided
    stats = {"embedded": 0, "cached": 0, "provided": len(positions)}
    if len(positions) == memories.height:  # every vector provided, row-aligned already
        return texts, context_vectors(memories, provided, overwrite=True), stats
    given = np.zeros(memories.height, dtype=bool)
    given[positions] = True
    need = memories.select("id", pl.col("content").alias("text")).with_row_index("_row").filter(pl.Series(~given))
    need = need.with_columns(text_hash=pl.col("text").map_elements(embed.text_hash, return_dtype=pl.String))
    unique = need.unique("text_hash", keep="first").sort("text_hash")
    shards = [unique.slice(i, shard_size) for i in range(0, unique.height, shard_size)] or [unique]
    paths = [partitions.write_frame(shard.select("text_hash", "text"), work / "embed" / f"texts-{i}.parquet") for i, shard in enumerate(shards)]
    futures = [embed_shard_task.submit(path, config, cache_dir, i) for i, path in enumerate(paths)]
    results = [f.result() for f in futures]
    stats.update(embedded=sum(r[1]["misses"] for r in results), cached=sum(r[1]["hits"] for r in results))
    vectors = np.empty((memories.height, dim), dtype=np.float32)
    vectors[positions] = provided
    del provided
    if need.height:
        computed = pl.concat([partitions.read_frame(r[0]) for r in results])
        found = need.select("text_hash").join(computed, on="text_hash", how="left", maintain_order="left").get_column("embedding")
        vectors[need.get_column("_row").to_numpy()] = found.list.to_array(dim).to_numpy()
    return texts, context_vectors(memories, vectors, overwrite=True), stats


def scored_by_namespace(
    memories: pl.DataFrame, vectors: np.ndarray, scoring: ScoringConfig, focus: set[str] | None, work: Path, previous_evidence: Path | None = None,
) -> list[partitions.ScorePart]:
    """Links within each namespace (a partition each: links never cross one)."""
    futures = []
    indexed = memories.with_row_index("_row")
    for i, ((namespace,), group) in enumerate(indexed.group_by("namespace", maintain_order=True)):
        focus_ids = None if focus is None else sorted(focus.intersection(group.get_column("id").to_list()))
        if focus_ids is not None and not focus_ids:
            continue
        folder = work / "score" / f"{i:06d}"
        folder.mkdir(parents=True, exist_ok=True)
        partitions.write_frame(group.drop("_row"), folder / "memories.parquet")
        partitions.write_matrix(vectors[group.get_column("_row").to_numpy()], folder / "vectors.npy")
        futures.append(score_task.submit(namespace, folder, scoring, focus_ids, previous_evidence))
    return [f.result() for f in futures]


def evidence_partition(parts: list[partitions.ScorePart], memories: pl.DataFrame, previous_evidence: Path | None, work: Path) -> Path | None:
    """Every memory's classifier evidence as one partition grouped by namespace (each one's rows
    by id), for the next incremental run: the score tasks' own, and the last snapshot's rows of
    the namespaces no task scored (no memory of theirs changed; rows of memories gone are left
    out). Concatenated, not sorted: 100 namespaces' files sorted by DuckDB in the flow cost ~3 s."""
    made = [part.evidence for part in sorted(parts, key=lambda part: part.namespace)]
    if previous_evidence is None and len(made) == 1:
        return made[0]
    if previous_evidence is not None:
        scored = [part.namespace for part in parts]
        keep = pl.col("id").is_in(memories.get_column("id").implode()) & ~pl.col("namespace").is_in(pl.Series(scored, dtype=pl.String).implode())
        made.append(partitions.filtered_partition(previous_evidence, keep, work / "score" / "evidence_kept.parquet"))
    if not made:
        return None
    return partitions.concatenated_partition(made, work / "score" / "evidence.parquet")


def read_links(paths: list[Path]) -> pl.DataFrame:
    frames = [partitions.read_frame(path) for path in paths]
    return pl.concat(frames) if frames else links.empty_scored_links()


def stored_links_partition(parts: list[partitions.ScorePart], work: Path) -> Path:
    """The run's stored links as one partition sorted by the link key (what the snapshot
    keeps for the next incremental run): a namespace's own when there is one, else its
    namespaces' merged by DuckDB, which spills rather than holding them in the flow."""
    if len(parts) == 1:
        return parts[0].links
    if not parts:
        return partitions.write_frame(links.empty_scored_links(), work / "score" / "links.parquet")
    return partitions.sorted_partition([part.links for part in parts], work / "score" / "links.parquet", LINK_KEY)


@dataclass
class Linked:
    """Links of this run: before the cap (the partition kept for the next incremental run) and after it."""

    scored: Path
    capped: pl.DataFrame
    fingerprints: pl.DataFrame
    pairs_scored: int
    changed: int
    deleted: int
    evidence: Path | None  # every memory's classifier evidence (evidence_partition; None where no namespace was scored)


def discovered_links(memories: pl.DataFrame, vectors: np.ndarray, texts: pl.DataFrame, previous: dict[str, pl.DataFrame] | None, scoring: ScoringConfig, work: Path) -> Linked:
    """Score the pairs that need it: all of them in a full run; in an incremental run only
    pairs touching a new, edited or deleted memory, the rest kept from the last snapshot."""
    fingerprints = incremental.memory_fingerprints(memories, texts)
    if previous is None:  # each namespace's task capped its own links
        parts = scored_by_namespace(memories, vectors, scoring, None, work)
        capped = read_links([part.capped for part in parts])  # in no order: with_manual_links sorts what it publishes
        return Linked(stored_links_partition(parts, work), capped, fingerprints, sum(p.pairs for p in parts), memories.height, 0,
                      evidence_partition(parts, memories, None, work))
    changed, deleted = incremental.changed_memory_ids(fingerprints, previous["fingerprints"])
    changed |= incremental.moved_vector_ids(memories.get_column("id"), vectors, previous["embeddings"])
    came = changed - set(previous["fingerprints"].get_column("id").to_list())
    changed |= incremental.citing_ids(memories, came | deleted)
    reweighed = reweighed_ids(previous.get("memory_terms"), memories)
    previous_evidence = previous.get("memory_evidence")  # None where the last snapshot kept none
    # stored links stop at the cap's reach: memories whose top links may have lost a member are scored again.
    # The copy groups once, for the cap's reach and the cap; each unchanged text was normalised in the last evidence
    known_texts = None if previous_evidence is None else pl.read_parquet(previous_evidence, columns=["content", "copy_text"])
    groups = copies.copy_groups_with_known_texts(memories, known_texts)
    del known_texts
    reach = cap_reach.cap_reach(memories, scoring.max_links_per_memory, groups=groups)
    previous_links = previous["scored_links"]  # a partition: never read whole into the flow
    focus = cap_reach.refocused(changed | reweighed, deleted, pl.read_parquet(previous_links, columns=["source_id", "target_id"]), reach)
    kept = partitions.filtered_partition(previous_links, incremental.untouched(focus | deleted), work / "score" / "kept.parquet")
    parts = scored_by_namespace(memories, vectors, scoring, focus, work, previous_evidence)
    # kept has no end in focus and fresh has one in every row: the two never overlap.
    stored = [kept, *(part.links for part in parts)]
    scored = partitions.sorted_partition(stored, work / "score" / "links.parquet", LINK_KEY, leaving_out=beyond_reach_keys(stored, reach))
    capped = links.capped_links_of_partition(scored, scoring.max_links_per_memory, memories, tau_days=scoring.tau_days, groups=groups)
    return Linked(scored, capped, fingerprints, sum(p.pairs for p in parts), len(changed), len(deleted),
                  evidence_partition(parts, memories, previous_evidence, work))


def reweighed_ids(previous_terms: pl.DataFrame | None, memories: pl.DataFrame) -> set[str]:
    """Memories holding a term that became common in its namespace since the last snapshot
    (`previous_terms`: its memories' namespace and terms), or stopped being one: their pairs
    weigh it otherwise, so they are scored again (all of them where the last terms are unknown)."""
    if previous_terms is None:
        return set(memories.get_column("id").to_list())
    return namespace_terms.holders_of_changed(namespace_terms.common_terms(previous_terms), namespace_terms.common_terms(memories), memories)


def beyond_reach_keys(paths: list[Path], reach: cap_reach.CapReach) -> pl.DataFrame:
    """The link keys of the links in these partitions that the cap can no longer keep, read
    from the columns cap_reach ranks by alone (all links at once: a memory's rank is among all of its)."""
    columns = [*LINK_KEY, "score", "cross_reference", "origin"]
    decided = pl.concat([pl.read_parquet(path, columns=columns) for path in paths])
    return decided.filter(cap_reach.beyond_reach(decided, reach)).select(LINK_KEY)


def with_manual_links(capped: pl.DataFrame, memories: pl.DataFrame, catalog: Catalog, run_id: str) -> pl.DataFrame:
    """The published relationships: discovered links after the cap, merged with the manual
    log (a manual link overrides a discovered one on the same pair)."""
    records, bad_lines = manual_log.read_records(catalog.manual_log)
    manual, skipped = manual_relationships(records, memories, run_id)
    for line, why in skipped + [(n, why) for n, _, why in bad_lines]:
        get_run_logger().warning("manual link on line %d not published: %s", line, why)
    return merged_relationships(capped, manual).with_columns(run_id=pl.lit(run_id))


def published_snapshot(run: RunRecord, extracted: Extracted, memories: pl.DataFrame, vectors: np.ndarray, linked: Linked, relationships: pl.DataFrame) -> tuple[publish.Published, pl.DataFrame]:
    """Every table of the snapshot, and the state the next incremental run reads, published
    in one switch; returns what was published and the tier distribution."""
    tier_distribution = links.tier_distribution(memories, relationships)
    tables = {
        "memories": memories,
        "relationships": relationships,
        "tier_distribution": tier_distribution,
        "tier_links": links.tier_links(relationships),
        "rejects": extracted.rejects.with_columns(run_id=pl.lit(run.run_id)),
    }
    # the vectors written a part at a time, not copied whole into a frame of lists (1.5 GB at 1M)
    embeddings, _ = partitions.write_frames(publish.embedding_parts(memories.get_column("id"), vectors), run.work_dir / "publish" / "embeddings.parquet",
                                            publish.EMBEDDING_SCHEMA)
    state = {
        "embeddings": embeddings,
        "scored_links": linked.scored,
        "fingerprints": linked.fingerprints,
        **({"memory_evidence": linked.evidence} if linked.evidence is not None else {}),
    }
    tables["runs"] = run.runs_table()
    published = publish_task(tables, state, run.catalog, run.run_id, run.summary)
    publish.append_run_log(run.catalog, run.summary)  # the log of every run; the snapshot has its own record
    fault_point("publish:logged")
    return published, tier_distribution


# ---------------------------------------------------------------- the flow


def local_task_threads() -> int:
    """How many mapped tasks run at once in the flow process (Prefect's own
    PREFECT_TASKS_RUNNER_THREAD_POOL_MAX_WORKERS where set, else one per core, at least 4).
    Each task's polars, DuckDB and numpy already use every core; unbounded, Prefect started
    every namespace's score task at once (a thread each), holding all their intermediates
    together: 100 namespaces of 1,000 ran at load 9 on 2 cores. At least 4, as a small task
    is mostly waiting on Prefect's API, and 2 at a time made small runs ~30% slower."""
    configured = get_current_settings().tasks.runner.thread_pool_max_workers
    return configured or max(4, os.cpu_count() or 4)


def run_settings(config_path: str | None, out: str | None) -> Settings:
    settings = load_settings(config_path)
    return settings.with_output(out) if out else settings


@flow(name="correlate", log_prints=False, task_runner=ThreadPoolTaskRunner(max_workers=local_task_threads()))
def correlate(config_path: str | None = None, out: str | None = None, full: bool = False, shard_size: int = 2048) -> dict[str, Any]:
    """Run the correlator once: extract, terms, embed, candidates + score, manual links, publish."""
    settings = run_settings(config_path, out)
    if not settings.enabled:
        get_run_logger().info("CORRELATOR_ENABLED is false: nothing to do")
        return {"status": "disabled"}
    run = RunRecord.start(settings, full)
    with run.recorded():
        with run.timed("extract"):  # 1. stores -> memories + rejects
            extracted = extracted_stores(settings, run.work_dir)
        with run.timed("terms"):  # 2. entities and key terms
            memories = terms_task(extracted.memories, run.previous["memory_terms"] if run.previous else None)
            extracted = dataclasses.replace(extracted, memories=extracted.memories.clear())  # they go on as `memories`
        with run.timed("embed"):  # 3. vectors: provided, cached or encoded
            provided = embed.provided_matrix(memories, embed.model_dim(settings.embedding.model))
            # the provided vectors are in `provided` now: the list column goes before the context is mixed (1.5 GB at 1M)
            memories = memories.drop("embedding")
            texts, vectors, embed_stats = embedded_memories(memories, provided, settings.embedding, run.cache_dir, shard_size, run.work_dir)
            del provided
        fault_point("candidates")
        with run.timed("score"):  # 4. + 5. candidates, score, classify, cap
            linked = discovered_links(memories, vectors, texts, run.previous, settings.scoring, run.work_dir)
        with run.timed("manual"):  # 6. manual links
            relationships = with_manual_links(linked.capped, memories, run.catalog, run.run_id)
            linked = dataclasses.replace(linked, capped=linked.capped.clear())  # published as `relationships`: not held twice
        run.counted(extracted, memories, relationships, embed_stats, linked)
        with run.timed("publish"):  # 7. publish atomically
            published, tier_distribution = published_snapshot(run, extracted, memories, vectors, linked, relationships)
        with run.timed("dashboard"):
            dashboard = dashboard_task(run.catalog.root)
        return run.finished(published.database, dashboard, relationships, memories, tier_distribution)
