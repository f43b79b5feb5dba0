"""What the mininet-wifi backend needs from the host, as ``quicbed doctor`` lines."""

from __future__ import annotations

import importlib.metadata
import re

from quicbed.backends.mininet_wifi.host import (
    INSTALL_FIX,
    import_problem,
    networkmanager_problem,
    ovs_running,
    versions,
)
from quicbed.host.capabilities import Capability, Check, binary_capability

MININET_WIFI_FIX = f"install Mininet-WiFi: {INSTALL_FIX}"


def _mininet_wifi() -> Capability:
    """Mininet-WiFi importable, with the versions of Mininet and FlightRadarAPI it needs."""
    problem = import_problem()
    if problem:
        what, _, fix = problem.partition(" (fix: ")
        return Capability("mininet_wifi", False, what, "the mininet-wifi backend", fix.rstrip(")") or MININET_WIFI_FIX)
    found = versions()
    detail = ", ".join(
        f"{name} {info.get('version')}" + (f" @{info['commit'][:12]}" if info.get("commit") else "")
        for name, info in found.items()
    )
    return Capability("mininet_wifi", True, detail, "the mininet-wifi backend", MININET_WIFI_FIX)


def _mininet_version() -> Capability:
    """Mininet-WiFi uses mininet.util.fmtBps (Mininet >= 2.3.1b2; Debian and PyPI ship 2.3.0)."""
    try:
        import mininet.net
        import mininet.util
    except ImportError:
        return Capability("mininet", False, "not importable", "the mininet-wifi backend", MININET_WIFI_FIX)
    version = getattr(mininet.net, "VERSION", "?")
    ok = hasattr(mininet.util, "fmtBps")
    return Capability(
        "mininet",
        ok,
        f"{version}" + ("" if ok else " (too old: no fmtBps, needs >= 2.3.1b2)"),
        "the mininet-wifi backend",
        f"install Mininet >= 2.3.1b2 from upstream git: {INSTALL_FIX}",
    )


def _flightradar() -> Capability:
    """mn_wifi.net imports the FlightRadar24 module, which FlightRadarAPI 1.6 removed."""
    try:
        version = importlib.metadata.version("FlightRadarAPI")
    except importlib.metadata.PackageNotFoundError:
        return Capability(
            "flightradarapi",
            False,
            "not installed",
            "the mininet-wifi backend (mn_wifi imports it)",
            "pip install 'FlightRadarAPI<1.6'",
        )
    major_minor = tuple(int(x) for x in re.findall(r"\d+", version)[:2])
    ok = major_minor < (1, 6)
    return Capability(
        "flightradarapi",
        ok,
        version + ("" if ok else " (1.6 removed the module mn_wifi imports)"),
        "the mininet-wifi backend (mn_wifi imports it)",
        "pip install 'FlightRadarAPI<1.6'",
    )


def _ovs_running() -> Capability:
    running = ovs_running()
    return Capability(
        "ovs_running",
        running,
        "ovsdb-server and ovs-vswitchd answer" if running else "not running",
        "Mininet-WiFi access points on this host (they need Open vSwitch before they are created; "
        "inside the microVM the backend starts a private one)",
        "systemctl start openvswitch-switch",
    )


def _networkmanager() -> Capability:
    problem = networkmanager_problem()
    return Capability(
        "networkmanager",
        problem is None,
        "leaves mac80211_hwsim radios alone (or is not running)"
        if problem is None
        else "running and managing mac80211_hwsim radios",
        "Mininet-WiFi radios (NetworkManager would fight hostapd and wpa_supplicant)",
        "unmanaged-devices=driver:mac80211_hwsim in /etc/NetworkManager/conf.d (roles/mininet_wifi)",
    )


def _mininet_wifi_tools() -> list[Capability]:
    backend = "the mininet-wifi backend"
    return [
        binary_capability("mnexec", ["mnexec", "-v"], backend, INSTALL_FIX, r"(\S+)"),
        binary_capability(
            "hwsim_mgmt", ["hwsim_mgmt", "-h"], backend + " (creates radios at run time)", INSTALL_FIX, r"(\d+\.\d+)"
        ),
        binary_capability("hostapd", ["hostapd", "-v"], backend + " (access points)", "apt-get install hostapd"),
        binary_capability(
            "wpa_supplicant", ["wpa_supplicant", "-v"], backend + " (stations)", "apt-get install wpasupplicant"
        ),
        binary_capability("iw", ["iw", "--version"], backend + " (radios, 802.11s mesh)", "apt-get install iw"),
        binary_capability(
            "wmediumd",
            ["wmediumd", "-V"],
            "wmediumd in the mininet-wifi backend (optional medium simulation)",
            "build ramonfontes/wmediumd (optional; HT radios work better without it)",
        ),
    ]


#: the mininet-wifi backend's doctor checks: (name if it fails, what it disables, check)
CHECKS: tuple[Check, ...] = (
    ("mininet_wifi", "the mininet-wifi backend", _mininet_wifi),
    ("mininet", "the mininet-wifi backend", _mininet_version),
    ("flightradarapi", "the mininet-wifi backend", _flightradar),
    ("ovs_running", "Mininet-WiFi access points on this host", _ovs_running),
    ("networkmanager", "Mininet-WiFi radios", _networkmanager),
    ("mininet_wifi_tools", "the mininet-wifi backend", _mininet_wifi_tools),
)
