"""What the ns3 backend needs from the host, as ``quicbed doctor`` lines."""

from __future__ import annotations

import glob
from pathlib import Path

from quicbed.backends.ns3 import build
from quicbed.host.capabilities import Capability, Check, tool_version


def _ns3() -> Capability:
    libraries = glob.glob("/usr/lib/*/libns3*-wifi*.so*") + glob.glob("/usr/lib/libns3*-wifi*.so*")
    headers = Path("/usr/include/ns3/wifi-module.h").exists() or bool(glob.glob("/usr/include/ns3*/ns3/wifi-module.h"))
    version = tool_version(["dpkg-query", "-W", "-f", "${Version}", "libns3-dev"], r"([\d.]+\S*)")
    allocator = bool(glob.glob("/usr/lib/*/libjemalloc.so") + glob.glob("/usr/lib/libjemalloc.so"))
    installed = build.installed_version()
    too_old = build.missing() if installed is not None and installed < build.MINIMUM_VERSION else None
    ok = bool(libraries) and headers and allocator and not too_old
    detail = (
        f"libns3-dev {version}"
        if ok
        else too_old
        if too_old
        else "libraries without headers"
        if libraries and not headers
        else "jemalloc (libjemalloc-dev), which the channel program is linked with, missing"
        if libraries
        else "not installed"
    )
    return Capability(
        "ns3",
        ok,
        detail,
        "the ns3 WiFi backend (airtime, A-MPDU, CSMA/CA)",
        "apt-get install libns3-dev libjemalloc-dev",
    )


#: the ns3 backend's doctor checks: (name if it fails, what it disables, check)
CHECKS: tuple[Check, ...] = (("ns3", "the ns3 WiFi backend", _ns3),)
