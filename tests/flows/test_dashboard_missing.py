"""A run whose dashboard cannot be built (plotly missing) says so in its report; it is not a
silent "published" with no dashboard."""

from __future__ import annotations

import builtins

from reliability.flowkit import write_config
from crosstier.transforms.publish.run_report import summary_lines


def test_a_missing_dashboard_dependency_is_a_warning_in_the_run_report(tmp_path, monkeypatch, shared_embedding_cache):
    from crosstier.flows.correlate import correlate

    monkeypatch.setenv("EMBED_CACHE_DIR", str(shared_embedding_cache))
    config = write_config(tmp_path / "stores", {"notes": [{"id": "a", "tier": "semantic", "content": "billing-api runs on Python 3.12"},
                                                          {"id": "b", "tier": "episodic", "content": "Moved billing-api to Python 3.12"}]})
    real_import = builtins.__import__

    def without_plotly(name, *args, **kwargs):
        if name == "crosstier.dashboards.build" or name.startswith("plotly"):
            raise ModuleNotFoundError("No module named 'plotly'", name="plotly")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_plotly)
    try:
        summary = correlate(config_path=str(config), out=str(tmp_path / "wh"), full=True)
    finally:
        monkeypatch.setattr(builtins, "__import__", real_import)
    assert summary["status"] == "published" and summary["outputs"]["dashboard"] is None
    assert summary["warnings"] == ["no dashboard: the dashboard dependency 'plotly' is not installed (pip install plotly)"]
    assert "warning: no dashboard: the dashboard dependency 'plotly'" in "\n".join(summary_lines(summary))
    assert "warning: no dashboard" in (tmp_path / "wh" / "reports" / "latest-run.md").read_text()
