"""The cross-tier correlator: finds how an agent's episodic, semantic and procedural memories
relate, scores each link and publishes a relationship table that retrieval reads.

One import root over the repository's folders (mapped in pyproject.toml):

- `crosstier.core`        settings, catalog of output paths, manual-link log, vocabulary
                          (imports nothing above it)
- `crosstier.transforms`  pure stage functions: stores, embed, link, publish (transforms/)
- `crosstier.sql`         DuckDB SQL, one statement per file (sql/)
- `crosstier.flows`       the Prefect flow `correlate` that wires the stages (flows/)
- `crosstier.retrieval`   the read-only side (retrieval/)
- `crosstier.dashboards`  the run dashboard (dashboards/)
- `crosstier.cli`         the `ctc` command line, on top; nothing imports it
"""
