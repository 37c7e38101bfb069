"""Pure stage functions over polars, pyarrow and numpy data; no Prefect imports.

The sub-packages are the pipeline's stages, in order:

- `stores`   tier stores -> canonical memory rows + reject rows
- `embed`    memories -> the text each is embedded as -> unit vectors (cached by text hash)
- `link`     memories + vectors -> terms, candidate pairs, scored and typed links, the cap,
             manual links merged, incremental bookkeeping
- `publish`  the run's tables -> one atomic snapshot, the run log and the run report

`schema` holds the table schemas every stage shares.
"""
