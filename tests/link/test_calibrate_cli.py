"""`ctc calibrate` end to end on the tiny snapshot, and `ctc link A B not_related`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from crosstier.core.catalog import Catalog
from crosstier.core.manual_log import read_records
from crosstier.retrieval.testing import publish_tiny
from crosstier.transforms.link.calibration import load_calibration

RELATED = [("ep1", "sem1"), ("ep1", "sem-secret"), ("ep1", "proc1"), ("ep1", "ep2"), ("sem1", "sem-secret")]
UNRELATED = [("orphan1", "ep1"), ("orphan1", "sem1"), ("sem3", "ep1"), ("orphan1", "proc1"), ("orphan1", "ep2")]


@pytest.fixture()
def out(tmp_path):
    return publish_tiny(tmp_path / "warehouse")


def ctc(out, *args):
    return subprocess.run([sys.executable, "-m", "crosstier.cli", *args, "--out", str(out)],
                          capture_output=True, text=True, cwd=out, timeout=120)


def test_calibrate_fits_from_a_labelled_file_and_writes_a_file_the_config_can_name(out, tmp_path):
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"a": a, "b": b, "related": r}) + "\n"
                              for pairs, r in ((RELATED, True), (UNRELATED, False)) for a, b in pairs))
    target = tmp_path / "mine.json"
    done = ctc(out, "calibrate", "--labels", str(labels), "--random-negatives", "0", "--write", str(target))
    assert done.returncode == 0, done.stderr + done.stdout
    assert "file related 5" in done.stdout and "file unrelated 5" in done.stdout
    assert f'calibration = "{target}"' in done.stdout
    calibration = load_calibration(str(target))
    assert calibration.semantic(1.0) == pytest.approx(1.0)
    assert calibration.semantic(0.0) == pytest.approx(0.0)


def test_not_related_labels_are_logged_and_counted_as_negatives(out, tmp_path):
    for a, b in UNRELATED:
        done = ctc(out, "link", a, b, "not_related")
        assert done.returncode == 0, done.stderr
    records, _ = read_records(Catalog(out).manual_log)
    assert {r["relationship_type"] for r in records} == {"not_related"}
    assert ctc(out, "calibrate", "--random-negatives", "0").returncode == 1  # no related pairs yet: says what to add
    for a, b in RELATED:
        assert ctc(out, "link", a, b, "references").returncode == 0
    done = ctc(out, "calibrate", "--random-negatives", "0")
    assert done.returncode == 0, done.stderr + done.stdout
    assert "manual related 5" in done.stdout and "manual unrelated 5" in done.stdout
    assert (out / "calibration.json").is_file()


def test_link_rejects_an_unknown_label(out):
    done = ctc(out, "link", "ep1", "sem1", "unrelated-ish")
    assert done.returncode != 0 and "not_related" in done.stderr
