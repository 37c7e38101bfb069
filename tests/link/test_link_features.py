"""The classifier's evidence (features.link_features) made in worker processes equals the same
evidence made in one process, row for row, and the entity terms a run remembered are let go."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import polars as pl
import pytest

import crosstier.transforms.link.features as features
from crosstier.transforms import forked
from crosstier.transforms.link import terms as terms_module
from crosstier.transforms.link.terms import with_terms

_spec = importlib.util.spec_from_file_location("bench_corpus", Path(__file__).parents[2] / "bench" / "corpus.py")
corpus = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(corpus)


def _memories() -> pl.DataFrame:
    generated, _ = corpus.generate_corpus(300, seed=3)
    extra = pl.DataFrame([
        {**generated.row(0, named=True), "id": "ws:skill/rotate-api-keys", "content": "How to rotate api keys: run vault rotate."},
        {**generated.row(1, named=True), "id": "cite-1", "content": f"Kept the steps as the rotate-api-keys skill, see {generated['id'][5]}."},
        {**generated.row(2, named=True), "id": "cite-2", "content": "There is no man walking outside; the server was not restarted.",
         "refs": [generated["id"][7], "missing-id"]},
        {**generated.row(3, named=True), "id": "copy-1", "content": generated["content"][250]},  # a text of another worker's rows
    ], schema=generated.schema)
    return with_terms(pl.concat([generated, extra]))


def test_evidence_made_in_worker_processes_equals_evidence_made_in_one(monkeypatch):
    memories = _memories()
    monkeypatch.setattr(features, "_PARALLEL_MIN_ROWS", 10**9)
    alone = features.link_features(memories)
    assert alone.filter(pl.col("id") == "cite-1")["ref_ids"].to_list()[0] == sorted([memories["id"][5], "ws:skill/rotate-api-keys"])

    remembered = with_terms(memories.drop("terms"))  # with_terms remembers each text's entity terms again
    assert all(text in terms_module._REMEMBERED for text in remembered["content"].to_list())
    submitted = []
    pool = forked.ProcessPoolExecutor

    class Counted(pool):
        def submit(self, *args, **kwargs):
            submitted.append(args[0].__name__)
            return super().submit(*args, **kwargs)

    monkeypatch.setattr(forked, "ProcessPoolExecutor", Counted)
    monkeypatch.setattr(features, "_PARALLEL_MIN_ROWS", 40)
    monkeypatch.setattr(forked.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    parted = features.link_features(remembered)
    assert submitted == ["_evidence_rows_remembering"] * 2  # three parts: this process and two workers
    assert parted.equals(alone)
    # the workers took their texts' entity terms along; this process used up its own
    assert not any(text in terms_module._REMEMBERED for text in remembered["content"].to_list())


def test_a_daemonic_process_works_alone(monkeypatch):
    class Daemonic:
        daemon = True

    monkeypatch.setattr(forked.os, "sched_getaffinity", lambda pid: {0, 1})
    assert forked.parts_for(10_000, 40) == 2
    monkeypatch.setattr(forked.multiprocessing, "current_process", lambda: Daemonic())
    assert forked.parts_for(10_000, 40) == 1


@pytest.mark.parametrize("rows, cpus, want", [(39, 8, 1), (40, 8, 2), (100, 8, 4), (10_000, 2, 2), (10_000, 1, 1)])
def test_parts_grow_with_the_rows_up_to_the_cpus(monkeypatch, rows, cpus, want):
    monkeypatch.setattr(forked.os, "sched_getaffinity", lambda pid: set(range(cpus)))
    assert forked.parts_for(rows, 40) == want
    bounds = forked.row_bounds(rows, want)
    assert bounds[0][0] == 0 and bounds[-1][1] == rows and all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))


def test_terms_found_in_worker_processes_equal_terms_found_in_one_and_are_remembered_here(monkeypatch):
    memories = _memories().drop("terms")
    monkeypatch.setattr(terms_module, "_PARALLEL_MIN_ROWS", 10**9)
    alone = with_terms(memories)
    for text in memories["content"].to_list():
        terms_module._REMEMBERED.pop(text, None)
    monkeypatch.setattr(terms_module, "_PARALLEL_MIN_ROWS", 40)
    monkeypatch.setattr(forked.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    calls = []
    run_forked = forked.run_forked
    monkeypatch.setattr(forked, "run_forked", lambda todo: calls.append([f.__name__ for f, _ in todo]) or run_forked(todo))
    assert with_terms(memories).equals(alone)
    assert calls == [["_terms_of", "_terms_remembered", "_terms_remembered"]]
    # the workers' entity terms came back: the evidence made here finds every text's
    assert all(text in terms_module._REMEMBERED for text in memories["content"].to_list())


def test_evidence_taken_from_an_earlier_run_where_inputs_are_the_same_equals_evidence_made_afresh(monkeypatch):
    """live.reused_evidence: a memory whose inputs changed (content, entities, timestamp) is made
    again, and so is one whose `ref_ids` change because an id it names came (cite-2's refs) or
    went (cite-1's text); every other row is the earlier frame's. The result equals evidence made
    afresh, and only those rows were made."""
    from datetime import timedelta

    from crosstier.transforms.link import live

    memories = _memories()
    earlier = live.link_features_of(memories)
    ids = memories["id"].to_list()
    gone = ids[5]  # cite-1 names it in its text
    edited, tagged, moved = ids[10], ids[11], ids[12]
    after = memories.filter(pl.col("id") != gone).with_columns(
        pl.when(pl.col("id") == edited).then(pl.lit("The backup job is not running on Sundays.")).otherwise(pl.col("content")).alias("content"),
        pl.when(pl.col("id") == tagged).then(pl.lit(["Vault"])).otherwise(pl.col("entities")).alias("entities"),
        pl.when(pl.col("id") == moved).then(pl.col("timestamp") + timedelta(days=3)).otherwise(pl.col("timestamp")).alias("timestamp"),
    )
    came = {**memories.row(20, named=True), "id": "missing-id", "content": "The missing runbook, found."}  # cite-2 refers to it
    after = with_terms(pl.concat([after, pl.DataFrame([came], schema=memories.schema)]).drop("terms"))
    made = []
    evidence_rows = features._evidence_rows

    def counted(memory_ids, *args):
        made.extend(memory_ids)
        return evidence_rows(memory_ids, *args)

    monkeypatch.setattr(features, "_evidence_rows", counted)
    reused = live.reused_evidence(earlier, after)
    assert sorted(made) == sorted([edited, tagged, moved, "cite-1", "cite-2", "missing-id"])
    made.clear()
    assert reused.equals(live.link_features_of(after))
    assert reused.filter(pl.col("id") == "cite-2")["ref_ids"].to_list()[0] == sorted([ids[7], "missing-id"])
    assert gone not in reused.filter(pl.col("id") == "cite-1")["ref_ids"].to_list()[0]
    assert live.reused_evidence(None, after).equals(reused)


def _doubled_here_only(parent: int, value: int) -> int:
    if os.getpid() != parent:  # in a forked worker: die as one killed for memory would
        os._exit(9)
    return 2 * value


def test_work_of_a_worker_that_dies_is_done_here_instead():
    parent = os.getpid()
    assert forked.run_forked([(_doubled_here_only, (parent, v)) for v in (1, 2, 3)]) == [2, 4, 6]


def test_the_cheap_scans_before_the_date_patterns_change_no_text():
    """without_boilerplate and copies.normalised_text skip their date patterns where a cheap scan
    finds none of the characters every match needs: the same text as the patterns alone, on
    texts made of words, digits, dates, weekdays after a bracket and CJK dates."""
    import random
    import re
    import unicodedata

    from crosstier.transforms.link import copies

    pieces = ["deploy", "the", "Monday", "(Tuesday)", "(", ")", "on", "March", "3", "3rd", "2026-05-01", "10:30", "pm", "run", "#12",
              "星期三", "周一", "5月3日", "v2.1", "٣", ",", ".", "Sept", "  ", "\t", "*", "issue", "no."]
    rng = random.Random(7)
    texts = [" ".join(rng.choice(pieces) for _ in range(rng.randint(0, 9))) for _ in range(3000)]
    cut = sum(features.without_boilerplate(t) != t for t in texts)
    assert 0 < cut < len(texts)  # both ways taken
    for text in texts:
        assert features.without_boilerplate(text) == features._BOILERPLATE.sub(" ", text), text
        lowered = unicodedata.normalize("NFKC", text).lower()
        plain = copies._WEEKDAY_WORD.sub(" ", copies._DATE_NOISE.sub(" ", lowered)) if copies._DATE_NOISE.search(lowered) else lowered
        expected = copies._SPACE.sub(" ", copies._PUNCT.sub(" ", copies._MARKUP.sub(" ", plain))).strip()
        assert copies.normalised_text(text) == expected, text
    assert re.search(r"\d", "٣")  # a digit of another script counts as a digit in both scans


def test_copy_groups_take_known_texts_from_the_last_evidence_and_normalise_only_new_ones(monkeypatch):
    """An incremental run's copy groups (for the cap's reach and the cap) read each text's
    normalised form from the last snapshot's evidence and make it only for texts that are new
    there: the same groups as copies.copy_groups over every text."""
    from datetime import datetime, timezone

    from links_helpers import memories

    from crosstier.transforms.link import copies

    at = datetime(2026, 5, 1, tzinfo=timezone.utc)
    texts = ["Deploy **Friday** at 10:30", "deploy friday at 11:45", "Rotate the keys.", "rotate the KEYS", "a new text", "A new text!", "alone"]
    now = memories(*({"id": f"m{i}", "tier": "episodic", "content": text, "timestamp": at} for i, text in enumerate(texts)))
    before = now.head(4).with_columns(copy_text=pl.col("content").map_elements(copies.normalised_text, return_dtype=pl.String))
    made = []
    normalised = copies.normalised_text
    monkeypatch.setattr(copies, "normalised_text", lambda text: made.append(text) or normalised(text))
    groups = copies.copy_groups_with_known_texts(now, before)
    assert sorted(made) == sorted(texts[4:])
    expected = copies.copy_groups(now)
    assert expected.height == 6 and groups.sort("id").equals(expected.sort("id"))
    assert copies.copy_groups_with_known_texts(now, None).sort("id").equals(expected.sort("id"))
