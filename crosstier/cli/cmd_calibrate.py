"""`ctc calibrate`: fit the score calibration from the user's own labels and write the file the config names.

Labels: manual links (related), `ctc link A B not_related` records (not related), explicit
references in the stores (`refs`, `Source:` lines: related), an optional JSONL file of
{"a": ID, "b": ID, "related": true|false}, and random pairs of a namespace taken as unrelated
(--random-negatives per related pair; most pairs of a store are unrelated). Each pair's cosine
is read from the last snapshot's vectors and its term overlap from the memories' terms, so run
`ctc run` first. Then add `calibration = "<file>"` under [scoring]: the next run is full.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--labels", help="a JSONL file of {\"a\": ID, \"b\": ID, \"related\": true|false}")
    parser.add_argument("--write", help="the calibration file to write (default: <output dir>/calibration.json)")
    parser.add_argument("--random-negatives", type=int, default=4, help="random pairs taken as unrelated per related pair (default 4; 0: none)")
    parser.add_argument("--seed", type=int, default=12, help="seed of the random pairs")
    parser.add_argument("--json", action="store_true", help="print the calibration as JSON")


def _file_labels(path: str) -> list[tuple[str, str, bool, str]]:
    from crosstier.retrieval.errors import InvalidArgumentError

    labels = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            labels.append((str(row["a"]), str(row["b"]), bool(row["related"]), "file"))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InvalidArgumentError(f"{path}:{number}: expected {{\"a\": ID, \"b\": ID, \"related\": true|false}} ({exc})") from None
    return labels


def main(args: argparse.Namespace) -> int:
    import sys

    from crosstier.cli.cmd_read import settings_for
    from crosstier.retrieval.errors import ReadSideError

    try:
        return calibrate(args, settings_for(args))
    except ReadSideError as exc:
        print(f"ctc calibrate: {exc}", file=sys.stderr)
        return exc.exit_code


def calibrate(args: argparse.Namespace, settings) -> int:
    import numpy as np

    from crosstier.core.catalog import Catalog
    from crosstier.core.manual_log import read_records
    from crosstier.core.vocabulary import NOT_RELATED
    from crosstier.retrieval.snapshot import open_snapshot
    from crosstier.retrieval.vectors import snapshot_vectors
    from crosstier.transforms.link.calibration import CalibrationError, fitted_calibration, weighted_overlap

    snapshot = open_snapshot(settings.output_dir, settings)
    vectors = snapshot_vectors(snapshot)
    memories = {r["id"]: r for r in snapshot.query("select id, namespace, terms, refs from memories")}

    labels: list[tuple[str, str, bool, str]] = []
    records, _ = read_records(Catalog(settings.output_dir).manual_log)
    latest = {}
    for record in records:
        latest[tuple(sorted((str(record.get("source_id")), str(record.get("target_id")))))] = record.get("relationship_type")
    labels += [(a, b, kind != NOT_RELATED, "manual") for (a, b), kind in latest.items()]
    labels += [(m, ref, True, "reference") for m, row in memories.items() for ref in (row["refs"] or []) if ref in memories]
    if args.labels:
        labels += _file_labels(args.labels)
    usable = {}
    for a, b, related, origin in labels:
        if a != b and a in vectors.row and b in vectors.row and memories[a]["namespace"] == memories[b]["namespace"]:
            usable[tuple(sorted((a, b)))] = (related, origin)  # a later label on the pair wins
    positives = sum(related for related, _ in usable.values())
    rng = np.random.default_rng(args.seed)
    ids = np.array(sorted(vectors.row))
    wanted, tries = args.random_negatives * positives, 0
    while wanted > 0 and tries < 50 * max(1, wanted) and len(ids) > 1:
        tries += 1
        a, b = rng.choice(ids, size=2, replace=False)
        pair = tuple(sorted((str(a), str(b))))
        if pair not in usable and memories[pair[0]]["namespace"] == memories[pair[1]]["namespace"]:
            usable[pair] = (False, "random")
            wanted -= 1
    pairs = sorted(usable)
    cosines = [float(vectors.matrix[vectors.row[a]] @ vectors.matrix[vectors.row[b]]) for a, b in pairs]
    overlaps = [weighted_overlap(memories[a]["terms"] or [], memories[b]["terms"] or []) for a, b in pairs]
    related = [usable[p][0] for p in pairs]
    target = Path(args.write) if args.write else settings.output_dir / "calibration.json"
    try:
        calibration = fitted_calibration(cosines, overlaps, related, model=settings.embedding.model, source=str(target))
    except CalibrationError as exc:
        print(f"ctc calibrate: {exc}. Add manual links (`ctc link A B TYPE`), `ctc link A B not_related`, or --labels FILE.")
        return 1
    counts = {}
    for related_, origin in usable.values():
        counts[f"{origin} {'related' if related_ else 'unrelated'}"] = counts.get(f"{origin} {'related' if related_ else 'unrelated'}", 0) + 1
    target.parent.mkdir(parents=True, exist_ok=True)
    doc = {**calibration.to_json(), "fitted_from": counts}
    target.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        print("labelled pairs: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        print("semantic map (cosine -> semantic): " + ", ".join(f"{x:.2f}->{y:.2f}" for x, y in calibration.semantic_knots))
        print(f"co_full: {calibration.co_full}, co_shared_full: {calibration.co_shared_full}")
        print(f"wrote {target} ({calibration.fingerprint})")
        print(f'use it: under [scoring] in the config, calibration = "{target}" (the next run is full)')
    return 0
