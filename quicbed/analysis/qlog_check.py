"""Whether a qlog file loads in qvis as what it claims to be, and what qvis would show wrong.

The rules are qvis' own (quiclog/qvis, visualizations/src): the file's first characters name
``qlog_version`` and ``qlog_format`` (FileLoader: JSON-SEQ or JSON); the version is one
QlogSchema02 accepts; a trace's relative times need ``common_fields.reference_time``
(QlogLoaderV2); every event has a numeric ``time``, a ``name`` of the form ``category:type``
and a ``data`` object; and the congestion graph reads ``cwnd`` or ``congestion_window`` and
RTTs in milliseconds.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from quicbed.analysis.qlog import QUINN_DESCRIPTION, SECONDS_NOTE, qlog_text

#: the qlog versions qvis reads (QlogSchema02.Defaults.versionAliases)
QVIS_VERSIONS = ("draft-02", "draft-02-RC1", "qlog-03-WIP", "0.3")
VANTAGE_TYPES = ("client", "server", "network", "unknown")
EVENT_NAME = re.compile(r"[a-z0-9_]+:[a-z0-9_]+")
#: how far into the file qvis looks for the version and the format
HEADER_CHARACTERS = 400
#: examples of a kind of bad event given in a problem
EXAMPLES = 3


@dataclass
class QlogCheck:
    format: str  # "JSON" or "JSON-SEQ"
    version: str
    traces: int = 0
    events: int = 0
    #: what keeps qvis from reading the file as written
    problems: list[str] = field(default_factory=list)
    #: what it reads but shows wrong
    caveats: list[str] = field(default_factory=list)


def check_qlog(path: str | os.PathLike[str]) -> QlogCheck:
    text = qlog_text(path)
    header = text[:HEADER_CHARACTERS]
    if "qlog_version" not in header:
        return QlogCheck(
            "",
            "",
            problems=[f"no qlog_version in its first {HEADER_CHARACTERS} characters: qvis cannot tell what it is"],
        )
    sequential = "qlog_format" in header and "JSON-SEQ" in header
    try:
        top, traces = _sequential(text) if sequential else _document(text)
    except (ValueError, TypeError) as error:  # JSONDecodeError is a ValueError
        return QlogCheck("JSON-SEQ" if sequential else "JSON", "", problems=[str(error)])
    check = QlogCheck("JSON-SEQ" if sequential else "JSON", str(top.get("qlog_version")), traces=len(traces))
    if check.version not in QVIS_VERSIONS:
        check.problems.append(f"qlog_version {check.version!r}: qvis reads {', '.join(QVIS_VERSIONS)}")
    for number, trace in enumerate(traces):
        _check_trace(trace, f"trace {number}" if len(traces) > 1 else "the trace", check)
    descriptions = [str(said or "") for said in (top.get("description"), *(t.get("description") for t in traces))]
    if any(said.startswith(QUINN_DESCRIPTION) and SECONDS_NOTE in said for said in descriptions):
        check.caveats.append(
            "RTTs in seconds (quinn's qlog before quicbed put them in milliseconds): qvis' "
            "congestion graph reads milliseconds and draws them 1000 times too small; quicbed's "
            "analysis converts them"
        )
    return check


def _sequential(text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """RFC 7464: each record starts with RS; the first is the header with its ``trace``."""
    records = [json.loads(chunk) for chunk in text.split("\x1e") if chunk.strip()]
    if not records or not isinstance(records[0], dict) or not isinstance(records[0].get("trace"), dict):
        raise ValueError("JSON-SEQ without a header record holding 'trace'")
    header = records[0]
    return header, [{**header["trace"], "events": records[1:]}]


def _document(text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    document = json.loads(text)
    if not isinstance(document, dict) or not isinstance(document.get("traces"), list) or not document["traces"]:
        raise ValueError("a qlog JSON file holds a non-empty 'traces' list")
    return document, document["traces"]


def _check_trace(trace: Any, where: str, check: QlogCheck) -> None:
    if not isinstance(trace, dict):
        check.problems.append(f"{where} is not an object")
        return
    vantage = (trace.get("vantage_point") or {}).get("type", "unknown")
    if vantage not in VANTAGE_TYPES:
        check.problems.append(f"{where}: vantage_point type {vantage!r} is none of {', '.join(VANTAGE_TYPES)}")
    common = trace.get("common_fields") or {}
    if common.get("time_format") == "relative" and "reference_time" not in common:
        check.problems.append(f"{where}: relative times without common_fields.reference_time")
    events = trace.get("events")
    if not isinstance(events, list):
        check.problems.append(f"{where} has no events list")
        return
    check.events += len(events)
    bad: dict[str, list[int]] = {}
    for index, event in enumerate(events):
        for what, fails in (
            ("not an object", not isinstance(event, dict)),
            ("no numeric time", isinstance(event, dict) and not _number(event.get("time"))),
            (
                "a name that is not category:type",
                isinstance(event, dict) and not EVENT_NAME.fullmatch(str(event.get("name", ""))),
            ),
            ("no data object", isinstance(event, dict) and not isinstance(event.get("data"), dict)),
        ):
            if fails:
                bad.setdefault(what, []).append(index)
    for what, indices in bad.items():
        check.problems.append(
            f"{where}: {len(indices)} event(s) with {what} (e.g. event {', '.join(map(str, indices[:EXAMPLES]))})"
        )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
