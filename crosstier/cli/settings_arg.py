"""Settings for a CLI command: --config then --out."""

from __future__ import annotations

import argparse

from crosstier.core.config import Settings, load_settings


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The validated settings named by --config, with --out applied."""
    settings = load_settings(getattr(args, "config", None))
    if getattr(args, "out", None):
        settings = settings.with_output(args.out)
    return settings
