"""Gathered pair cosines (transforms/link/neighbours.py): the kernels candidate search runs on
every candidate pair for its bound and exact cosine, at chunk sizes around _PAIR_ROWS, on
random unit vectors and pairs sorted by their left row as candidate search sends them.

    .venv/bin/python bench/gather.py                       # 2M pairs over 100k rows
    .venv/bin/python bench/gather.py --pairs 5000000 --rows 64 128 256 2048

Each chunk size is timed three ways: every exact cosine (exact_pair_cosines, as references
and the watcher's scoring ask), and gathered_cosines with about half and about 30% of the
exact cosines wanted (a bound's check: candidate search's keeps ~30% of what it checks).
The exact cosines must come out bit-identical at every chunk size and from both functions.
Last line: RESULT rows_<size>_all_s=... rows_<size>_half_s=... rows_<size>_third_s=...
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from crosstier.transforms.link import neighbours  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="rows (memories)")
    parser.add_argument("--pairs", type=int, default=2_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--rows", type=int, nargs="+", default=[64, 128, 256, 2048], help="chunk sizes (_PAIR_ROWS) to time")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(args.n, args.dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    a = np.sort(rng.integers(args.n, size=args.pairs))
    b = rng.integers(args.n, size=args.pairs)
    half = lambda rows, cosines: cosines > 0.0  # noqa: E731
    third = lambda rows, cosines: rows % 10 < 3  # noqa: E731
    figures: dict[str, float] = {}
    reference = None
    for size in args.rows:
        neighbours._PAIR_ROWS = size
        start = time.perf_counter()
        exact = neighbours.exact_pair_cosines(vectors, a, b)
        figures[f"rows_{size}_all_s"] = round(time.perf_counter() - start, 2)
        for name, wanted in (("half", half), ("third", third)):
            start = time.perf_counter()
            some = neighbours.gathered_cosines(vectors, a, b, wanted)[1]
            figures[f"rows_{size}_{name}_s"] = round(time.perf_counter() - start, 2)
            kept = ~np.isnan(some)
            if not np.array_equal(some[kept], exact[kept]):
                raise SystemExit(f"gathered_cosines' exact cosines differ from exact_pair_cosines' at chunk size {size}")
        reference = exact if reference is None else reference
        if not np.array_equal(exact, reference):
            raise SystemExit(f"exact cosines differ at chunk size {size}")
        print(f"chunk {size:5d} pairs: every exact {figures[f'rows_{size}_all_s']:.2f} s, "
              f"half {figures[f'rows_{size}_half_s']:.2f} s, 30% {figures[f'rows_{size}_third_s']:.2f} s")
    print(f"reproduce: .venv/bin/python bench/gather.py --n {args.n} --pairs {args.pairs} --rows {' '.join(map(str, args.rows))}")
    print("RESULT " + " ".join(f"{k}={v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
