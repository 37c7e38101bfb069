"""The reliability suite's summary: its counts, printed at the end of every session that ran it."""

from __future__ import annotations

import json
import os

from reliability.stats import COUNTS, summary_line


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not COUNTS:
        return
    line = summary_line()
    terminalreporter.write_sep("-", "reliability suite")
    terminalreporter.write_line(line)
    target = os.environ.get("CTC_RELIABILITY_SUMMARY")
    if target:  # CI can keep the counts as a file too
        with open(target, "w", encoding="utf-8") as handle:
            json.dump({**COUNTS, "summary": line}, handle, sort_keys=True)
            handle.write("\n")
