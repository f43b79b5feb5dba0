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


def test_an_ns3_older_than_the_channel_s_api_is_named_not_taken_for_missing(tmp_path, monkeypatch):
    """Ubuntu 22.04 ships ns-3 3.35 under /usr/include/ns3.35/ns3: the channel needs 3.37's API,
    and both the build and doctor say so instead of 'headers not found' or 'yes'."""
    from quicbed.backends.ns3 import build, checks

    headers = tmp_path / "ns3.35" / "ns3"
    headers.mkdir(parents=True)
    (headers / "version-defines.h").write_text("#define NS3_VERSION_MAJOR 3\n#define NS3_VERSION_MINOR 35\n")
    monkeypatch.setattr(build, "NS3_INCLUDE", tmp_path)
    assert build.installed_version() == (3, 35)
    reason = build.missing()
    assert reason is not None and reason.startswith("ns-3 3.35 is installed; the channel program needs ns-3 3.37")
    line = checks._ns3()
    assert not line.available and line.detail == reason
    (headers / "version-defines.h").write_text("#define NS3_VERSION_MAJOR 3\n#define NS3_VERSION_MINOR 37\n")
    assert build.installed_version() == (3, 37) and not build.missing().startswith("ns-3 3.")
