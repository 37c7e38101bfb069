"""`ctc cache info|clear`: inspect or empty the embedding cache (vectors and ONNX exports)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    # A positional action, not subparsers: --config and --out then work after it as well.
    parser.add_argument("action", choices=("info", "clear"), help="info: what the cache holds, per model; clear: delete it (the next run embeds everything again)")
    parser.add_argument("--json", action="store_true", help="info: machine-readable output")
    parser.add_argument("--keep-models", action="store_true", help="clear: keep the ONNX exports of the models")


def cache_dir_of(settings) -> Path:  # settings: crosstier.core.config.Settings
    """The cache folder: [embedding] cache_dir (relative to the config file) or <output>/cache."""
    from crosstier.core.catalog import Catalog

    configured = settings.embedding.cache_dir
    if not configured:
        return Catalog(settings.output_dir).cache_dir
    path = Path(configured).expanduser()
    if not path.is_absolute() and settings.config_path is not None:
        path = settings.config_path.parent / path
    return path.resolve()


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def _print_info(info: dict) -> None:
    """The cache report for a person."""
    print(f"cache: {info['path']}{'' if info['exists'] else ' (does not exist yet)'}")
    for model in info["models"]:
        damaged = f", {len(model['damaged'])} damaged (rebuilt on the next run)" if model["damaged"] else ""
        print(f"  {model['model_id']}: {model['rows']} vectors in {model['shards']} shard(s), {_mib(model['bytes'])}{damaged}")
    for export in info["onnx"]:
        print(f"  onnx export {export['file']}: {_mib(export['bytes'])}")
    if info["temp_files"]:
        print(f"  {info['temp_files']} temp file(s) of unfinished writes")
    print(f"total: {_mib(info['total_bytes'])}")


def main(args: argparse.Namespace) -> int:
    from crosstier.cli.settings_arg import settings_from_args
    from crosstier.transforms.embed.cache import cache_info, clear_cache

    folder = cache_dir_of(settings_from_args(args))
    if args.action == "clear":
        removed = clear_cache(folder, keep_models=args.keep_models)
        print(f"removed {removed} file(s) from {folder}")
        return 0
    info = cache_info(folder)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        _print_info(info)
    return 0
