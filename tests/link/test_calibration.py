"""The calibration: the bundled maps, reading and checking a calibration file, fitting one from labels."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace

import numpy as np
import pytest

from crosstier.core.config import ScoringConfig, settings_from_dict
from crosstier.transforms.link.calibration import (
    BUNDLED,
    CalibrationError,
    calibration_from_dict,
    fitted_calibration,
    load_calibration,
    term_weight,
    weighted_overlap,
)


def test_the_bundled_map_is_monotone_spans_0_to_1_and_reaches_full_evidence():
    calibration = load_calibration(None)
    assert calibration.source == BUNDLED
    cosines = np.linspace(-1, 1, 401)
    values = calibration.semantic(cosines)
    assert np.all(np.diff(values) >= 0)
    assert values[0] == 0.0 and values[-1] == 1.0
    assert calibration.semantic(0.3) < 0.5 < calibration.semantic(0.45)  # STS-B: related starts near 0.45
    assert 0 < calibration.co_full <= 1


def test_term_weights_favour_rare_terms_and_overlap_is_weighted_jaccard():
    assert term_weight("world") < term_weight("thyroid") < term_weight("pgvector") == 1.0
    assert weighted_overlap(["pgvector", "world"], ["pgvector", "world"]) == pytest.approx(1.0)
    w = term_weight("world")
    assert weighted_overlap(["pgvector", "world"], ["world", "kafka"]) == pytest.approx(w / (2 + w))
    assert weighted_overlap([], []) == 0.0


@pytest.mark.parametrize(
    ("doc", "match"),
    [
        ({"co_full": 0.5}, "semantic_knots"),
        ({"semantic_knots": [[0, 0]], "co_full": 0.5}, "two knots"),
        ({"semantic_knots": [[0, 0], [0.5, 0.8], [0.4, 0.9], [1, 1]], "co_full": 0.5}, "must rise"),
        ({"semantic_knots": [[0, 0.5], [0.5, 0.3], [1, 1]], "co_full": 0.5}, "must rise"),
        ({"semantic_knots": [[0.1, 0], [1, 1]], "co_full": 0.5}, "span"),
        ({"semantic_knots": [[0, 0], [1, 1.5]], "co_full": 0.5}, "span"),
        ({"semantic_knots": [[0, 0], [1, 1]], "co_full": 0}, "co_full"),
        ({"semantic_knots": [[0, 0], [1, 1]], "co_full": 0.5, "co_shared_full": 0}, "co_shared_full"),
        ({"semantic_knots": [[0, 0], [1, 1]], "co_full": 0.5, "co_shared_full": "two"}, "co_shared_full"),
    ],
)
def test_a_bad_calibration_file_is_a_clear_error(doc, match):
    with pytest.raises(CalibrationError, match=match):
        calibration_from_dict(doc, "test.json")


def test_a_missing_calibration_file_is_a_clear_error(tmp_path):
    with pytest.raises(CalibrationError, match="not found"):
        load_calibration(str(tmp_path / "nope.json"))


def test_fitting_from_labels_gives_a_monotone_map_full_at_the_related_cosines():
    rng = np.random.default_rng(0)
    related_cos = rng.uniform(0.5, 0.9, 40)
    unrelated_cos = rng.uniform(-0.1, 0.45, 80)
    cosines = np.concatenate([related_cos, unrelated_cos])
    related = np.array([True] * 40 + [False] * 80)
    overlaps = np.concatenate([rng.uniform(0.2, 0.4, 40), np.zeros(80)])
    calibration = fitted_calibration(cosines, overlaps, related, model="m", source="mine.json")
    assert calibration.semantic(0.6) == pytest.approx(1.0)
    assert calibration.semantic(0.3) == pytest.approx(0.0)
    assert np.all(np.diff(calibration.semantic(np.linspace(0, 1, 101))) >= 0)
    assert calibration.co_full == pytest.approx(np.median(overlaps[:40]), abs=1e-4)
    assert calibration.cosine_floor(1.0) <= 0.55  # the inverse map the candidate bounds read


def test_fitting_needs_both_kinds_of_labels():
    with pytest.raises(CalibrationError, match="at least"):
        fitted_calibration([0.9] * 10, [0.5] * 10, [True] * 10, model="m", source="mine.json")


def test_the_config_names_a_calibration_relative_to_its_file_and_a_change_makes_the_next_run_full(tmp_path):
    from crosstier.flows.run_record import settings_fingerprint

    (tmp_path / "cal.json").write_text(json.dumps({"semantic_knots": [[0, 0], [1, 1]], "co_full": 1.0}))
    settings = settings_from_dict({"scoring": {"calibration": "cal.json"}}, base=tmp_path, env={})
    assert settings.scoring.calibration == str(tmp_path / "cal.json")
    bundled = settings_from_dict({}, base=tmp_path, env={})
    assert bundled.scoring.calibration is None
    assert settings_fingerprint(settings) != settings_fingerprint(bundled)
    # the file's maps count, not only its name: an edited file changes the fingerprint
    before = settings_fingerprint(settings)
    path = tmp_path / "cal.json"
    stat = path.stat()
    path.write_text(json.dumps({"semantic_knots": [[0, 0], [1, 0.9]], "co_full": 1.0}))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a later modification time, whatever the clock
    assert settings_fingerprint(settings) != before


def test_a_calibration_changes_scores_through_the_scoring_settings(tmp_path):
    from links_helpers import memories, vectors

    from crosstier.transforms.link.links import scored_links

    path = tmp_path / "linear.json"
    path.write_text(json.dumps({"semantic_knots": [[0, 0], [1, 1]], "co_full": 1.0}))
    frame = memories({"id": "a", "tier": "semantic", "content": "alpha"}, {"id": "b", "tier": "semantic", "content": "beta"})
    scoring = replace(ScoringConfig(), min_correlation_score=0.0)
    bundled = scored_links(frame, vectors(0.5), scoring).row(0, named=True)
    linear = scored_links(frame, vectors(0.5), replace(scoring, calibration=str(path))).row(0, named=True)
    assert bundled["cosine"] == linear["cosine"] == pytest.approx(0.5)
    assert linear["semantic"] == pytest.approx(0.5) and bundled["semantic"] > 0.8
    assert math.isclose(linear["score"], 0.4 * 0.5 / 0.65, rel_tol=1e-9)


def test_a_release_that_changes_a_rule_makes_the_next_run_full(tmp_path, monkeypatch):
    """An incremental run keeps the stored rows of every pair it does not score again, so the
    rules' code is in the fingerprint: a changed classification makes the next run full."""
    from crosstier.flows.run_record import settings_fingerprint
    from crosstier.transforms.link import links

    settings = settings_from_dict({}, base=tmp_path, env={})
    before = settings_fingerprint(settings)
    assert settings_fingerprint(settings) == before  # steady while nothing changes
    load = links.sql.load
    monkeypatch.setattr(links.sql, "load", lambda name: load(name) + ("\n-- a changed rule" if name == "classified_links" else ""))
    links.rules_fingerprint.cache_clear()
    try:
        assert settings_fingerprint(settings) != before
    finally:
        monkeypatch.undo()
        links.rules_fingerprint.cache_clear()
    assert settings_fingerprint(settings) == before
