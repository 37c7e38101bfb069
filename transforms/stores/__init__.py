"""Stage 1, extract: a configured store (jsonl, parquet, markdown workspace, sqlite, postgres)
in; canonical memory rows and reject rows out (records read = memories + rejects)."""
