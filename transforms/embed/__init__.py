"""Stage 3, embed: memories in; the text each is embedded as (`text`), then row-aligned unit
float32 vectors out (`vectors`), through a Parquet cache keyed by model and text hash (`cache`),
with the model resolved offline (`model`) and run by torch or onnx (`encoders`)."""
