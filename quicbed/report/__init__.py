"""``quicbed report``: statistics, figures and pages for a results folder.

``load`` reads ``results.jsonl`` and ``metadata.json`` into a frame of runs, ``summary``
computes per-cell statistics and relative gains, ``figures`` draws the plots (those over
runs in ``study_figures``, those of single runs in ``run_figures``), ``markdown``/``html``
write the pages and ``build`` ties them together.
"""

from quicbed.report.build import ReportOptions, ReportResult, build_report
from quicbed.report.load import ReportError, LoadedResults, load_results

__all__ = ["ReportError", "ReportOptions", "ReportResult", "LoadedResults", "build_report", "load_results"]
