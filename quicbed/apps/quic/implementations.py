"""QUIC implementations quicbed runs, by name, and which knob values each can honour.

A transport profile (docs/transport-profiles.md) means the same on every implementation;
a knob value an implementation has no way to honour is refused with the reason, never
approximated. ``aioquic`` is the Python stack (quicbed.apps.quic.server/client), ``quinn``
the native one (native/quinn, started through quicbed.apps.quic.native). A new one is a
subclass of :class:`QuicImplementation` registered here with
:func:`register_quic_implementation`; a transport names it with ``impl:``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from quicbed.apps.quic.profiles import TransportProfile
from quicbed.errors import QuicbedError, SpecError
from quicbed.host import bench_results

NATIVE_BINARY = "quicbed-quinn"
#: where a source checkout builds the binary (cargo build --release in native/quinn)
SOURCE_BUILD = Path(__file__).resolve().parents[3] / "native" / "quinn" / "target" / "release" / NATIVE_BINARY


class Missing(NamedTuple):
    """What this machine lacks to run an implementation, and how to get it."""

    what: str  # "the native QUIC endpoint (quicbed-quinn), which is not built"
    fix: str


@dataclass(frozen=True)
class QuicImplementation(ABC):
    name: str
    #: ``python -m`` module and leading arguments of the server and of the client; both take
    #: the options of quicbed.apps.quic.server / .client after these
    server: tuple[str, ...]
    client: tuple[str, ...]
    description: str
    #: what decides between the implementations: one connection's CPU ceiling (docs/endpoints.md, "Ceilings")
    ceiling: str

    @abstractmethod
    def refusals(self, profile: TransportProfile) -> list[str]:
        """Each knob value of ``profile`` this implementation cannot honour, with the reason."""

    def missing(self) -> Missing | None:
        """What this machine lacks to run it (None: nothing)."""
        return None

    def require_supported(self, profile: TransportProfile) -> None:
        """Raise a QuicbedError naming every knob this implementation cannot honour."""
        refused = self.refusals(profile)
        if refused:
            raise QuicbedError(
                f"{self.name} cannot run profile {profile.name!r}: "
                + "; ".join(refused)
                + ". Change these knobs (--knob NAME=VALUE, or knobs: in the transport) or use "
                "another implementation (docs/transport-profiles.md has a column per implementation)"
            )


class Aioquic(QuicImplementation):
    def refusals(self, profile: TransportProfile) -> list[str]:
        refused: list[str] = []
        if profile.congestion_control == "bbr":
            refused.append("congestion_control=bbr: aioquic has NewReno and CUBIC only")
        if profile.mtu_discovery:
            refused.append("mtu_discovery=true: aioquic has no path MTU discovery (its datagrams stay at 1200 bytes)")
        if profile.pacing_burst is not None:
            refused.append(
                f"pacing_burst={profile.pacing_burst}: aioquic's pacer runs on asyncio's timers, which "
                "wake at millisecond steps; fine pacing needs quinn"
            )
        return refused


class Quinn(QuicImplementation):
    def refusals(self, profile: TransportProfile) -> list[str]:
        refused: list[str] = []
        if profile.ack_decimation_after:
            refused.append(
                f"ack_decimation_after={profile.ack_decimation_after}: quinn asks the receiver for "
                "one ACK frequency per connection, it cannot change it after N packets"
            )
        if profile.ack_delay_rtt_fraction is not None:
            refused.append(
                f"ack_delay_rtt_fraction={profile.ack_delay_rtt_fraction:g}: quinn caps the ACK "
                "delay it asks for at one RTT, not at a fraction of it"
            )
        if profile.congestion_control == "bbr" and profile.slow_start_exit_rtt_increase is not None:
            refused.append(
                "slow_start_exit_rtt_increase with congestion_control=bbr: BBR leaves startup by its own bandwidth rule"
            )
        if profile.congestion_control == "bbr" and profile.initial_window is not None:
            refused.append("initial_window with congestion_control=bbr: quicbed's BBR starts from 10 datagrams")
        return refused

    def missing(self) -> Missing | None:
        if native_binary() is not None:
            return None
        return Missing(
            f"the native QUIC endpoint ({NATIVE_BINARY}), which is not built", "./scripts/install.sh builds it"
        )


#: the registry, by name (register_quic_implementation adds to it)
IMPLEMENTATIONS: dict[str, QuicImplementation] = {}
DEFAULT_IMPLEMENTATION = "aioquic"


def register_quic_implementation(implementation: QuicImplementation) -> None:
    """Make ``implementation`` available to transports as ``impl: NAME``."""
    IMPLEMENTATIONS[implementation.name] = implementation


def quic_implementation(name: object) -> QuicImplementation:
    """The registered implementation called ``name``; a SpecError on the ``impl`` field otherwise."""
    if not isinstance(name, str) or name not in IMPLEMENTATIONS:
        raise SpecError(
            f"unknown QUIC implementation {name!r}",
            field="impl",
            fix=f"use one of {', '.join(IMPLEMENTATIONS)} (a new one registers with "
            "register_quic_implementation in quicbed/apps/quic/implementations.py)",
        )
    return IMPLEMENTATIONS[name]


register_quic_implementation(
    Aioquic(
        "aioquic",
        ("quicbed.apps.quic.server",),
        ("quicbed.apps.quic.client",),
        "aioquic (Python), every knob",
        "Python (aioquic): one connection is CPU-bound at about 64-78 Mbit/s on a 2-core Debian 12 VM; above that it "
        "measures the CPU, not the network.",
    )
)
register_quic_implementation(
    Quinn(
        "quinn",
        ("quicbed.apps.quic.native", "server"),
        ("quicbed.apps.quic.native", "client"),
        "quinn + h3 (Rust, native/quinn)",
        "Native (quinn): about 2.5 Gbit/s on one core, so the network sets its rate.",
    )
)


def native_binary() -> Path | None:
    """The quicbed-quinn binary: beside this Python (installed into the virtualenv), on PATH,
    or the source checkout's release build."""
    beside = Path(sys.executable).parent / NATIVE_BINARY
    for candidate in (beside, shutil.which(NATIVE_BINARY), SOURCE_BUILD):
        if candidate is not None and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def require_native_binary() -> Path:
    binary = native_binary()
    if binary is None:
        raise QuicbedError(
            f"the native QUIC endpoint ({NATIVE_BINARY}) is not built: run ./scripts/install.sh "
            "(it installs cargo from Debian and builds it) or, with Rust >= 1.80, "
            "./prepare.sh && cargo build --release in native/quinn"
        )
    return binary


def native_version(binary: Path) -> str | None:
    """'quinn 0.11.12 (quicbed-quinn 0.1.0)' from the binary itself, or None if it does not run."""
    try:
        output = subprocess.run([str(binary), "version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        versions = json.loads(output.stdout)
    except ValueError:
        return None
    return f"quinn {versions.get('quinn')}, h3 {versions.get('h3')} (quicbed-quinn {versions.get('quicbed_quinn')})"


#: where bench/endpoints.py leaves the ceilings it measured on this machine (quicbed doctor shows them)
CEILINGS_FILE = bench_results.bench_dir() / "endpoints.json"


def save_ceilings(ceilings: dict[str, dict[str, object]], path: Path = CEILINGS_FILE) -> None:
    """Keep ``{implementation: {profile, mbit_per_s, measured}}`` for doctor (written whole, atomically)."""
    bench_results.write_json(path, ceilings)


def measured_ceiling(implementation: str, path: Path = CEILINGS_FILE) -> str | None:
    """'1234 Mbit/s (quic, bench/endpoints.py 2026-11-25)' if bench/endpoints.py measured it here."""
    entry = (bench_results.read_json(path) or {}).get(implementation)
    if not isinstance(entry, dict) or "mbit_per_s" not in entry:
        return None
    return (
        f"ceiling {float(entry['mbit_per_s']):.0f} Mbit/s on one connection ({entry.get('profile')} profile, "
        f"unshaped veth, bench/endpoints.py {entry.get('measured')})"
    )
