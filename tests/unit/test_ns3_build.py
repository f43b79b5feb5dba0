"""Building the ns-3 channel program: cache location, source hash, clear error without ns-3."""

from __future__ import annotations

import pytest

from quicbed.backends.ns3 import build
from quicbed.errors import MissingDependency


def test_missing_headers_give_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setattr(build, "NS3_INCLUDE", tmp_path)
    reason = build.missing()
    assert reason and "wifi-module.h" in reason and "apt-get install libns3-dev" in reason
    with pytest.raises(MissingDependency, match="apt-get install libns3-dev"):
        build.ensure_built()


def test_binaries_are_cached_per_source_hash(monkeypatch, tmp_path):
    monkeypatch.setenv("QUICBED_NS3_CACHE", str(tmp_path))
    digest = build.source_hash()
    assert len(digest) == 16 and digest == build.source_hash()
    assert build.binary_path() == tmp_path / digest / "quicbed-ns3-channel"
    names = {p.name for p in build.sources()}
    assert {"Makefile", "qbchannel.cc", "json.h"} <= names


def test_an_existing_binary_is_reused_without_building(monkeypatch, tmp_path):
    monkeypatch.setenv("QUICBED_NS3_CACHE", str(tmp_path))
    monkeypatch.setattr(build, "missing", lambda: None)
    target = build.binary_path()
    target.parent.mkdir(parents=True)
    target.write_text("#!/bin/sh\n")
    target.chmod(0o755)
    monkeypatch.setattr(build.subprocess, "run", lambda *a, **k: pytest.fail("must not build"))
    assert build.ensure_built() == target


def test_old_builds_are_pruned(monkeypatch, tmp_path):
    import os

    monkeypatch.setenv("QUICBED_NS3_CACHE", str(tmp_path))
    for age, name in enumerate(["new", "mid", "old", "older"]):
        binary = tmp_path / name / "quicbed-ns3-channel"
        binary.parent.mkdir()
        binary.write_text("x")
        os.utime(binary, (1e9 - age * 100, 1e9 - age * 100))
    removed = build.prune(keep=2)
    assert sorted(p.name for p in removed) == ["old", "older"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mid", "new"]


def test_a_missing_allocator_gives_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setattr(build, "REQUIRED_HEADERS", ())
    monkeypatch.setattr(build, "_library", lambda name: None if name == build.ALLOCATOR_LIBRARY else tmp_path / name)
    reason = build.missing()
    assert reason and "jemalloc" in reason and "apt-get install libns3-dev libjemalloc-dev" in reason
