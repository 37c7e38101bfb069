"""The core every layer stands on: settings (`config`), where outputs live (`catalog`), the
append-only manual-link log (`manual_log`), tiers and relationship types (`vocabulary`) and
atomic file writes (`atomic`). It imports nothing from the rest of the project."""
