"""Which QUIC implementations this machine can run, as ``quicbed doctor`` lines."""

from __future__ import annotations

from quicbed.apps.quic.implementations import measured_ceiling, native_binary, native_version
from quicbed.host.capabilities import Capability, Check, python_package_capability


def _quic_implementations() -> list[Capability]:
    """Each QUIC implementation, its version and, if bench/endpoints.py ran here, its ceiling."""
    aioquic = python_package_capability(
        "aioquic", "aioquic", "the aioquic QUIC and BQUIC endpoints", "pip install aioquic"
    )
    binary = native_binary()
    version = native_version(binary) if binary is not None else None
    quinn = Capability(
        "quinn",
        version is not None,
        f"{version} ({binary})" if version else ("not built" if binary is None else f"{binary} does not run"),
        "the native QUIC endpoints (transports quic-native, bquic-native; impl: quinn)",
        "./scripts/install.sh builds it (apt cargo-web, crates.io), or in native/quinn: "
        "./prepare.sh && cargo build --release",
    )
    for line in (aioquic, quinn):
        ceiling = measured_ceiling(line.name) if line.available else None
        if ceiling:
            line.detail += f"; {ceiling}"
    return [aioquic, quinn]


#: the QUIC endpoints' doctor checks: (name if it fails, what it disables, check)
CHECKS: tuple[Check, ...] = (("quic_implementations", "QUIC endpoints", _quic_implementations),)
