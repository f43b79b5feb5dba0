"""Builds the programs of tests/unit/channel_models, which drive parts of the ns-3 channel
program (quicbed/backends/ns3/channel) on ns-3's simulated clock for the unit tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from quicbed.backends.ns3 import build

MODELS = Path(__file__).parent / "unit" / "channel_models"


def compile_driver(output: Path, driver: str, channel_sources: list[str], libraries: list[str]) -> Path:
    """Compiles ``driver`` (a file of tests/unit/channel_models) with the channel's ``channel_sources``
    against ns-3's ``libraries`` (names without ``ns3-``) into ``output``."""
    sources = [MODELS / driver, *(build.SOURCE_DIR / name for name in channel_sources)]
    subprocess.run(
        [
            os.environ.get("CXX", "g++"),
            "-std=c++17",
            "-O1",
            "-Wall",
            "-Wno-unused-parameter",
            f"-I{build.SOURCE_DIR}",
            f"-I{build.NS3_INCLUDE}",
            "-o",
            str(output),
            *map(str, sources),
            *(f"-lns3-{name}" for name in libraries),
        ],
        check=True,
    )
    return output


class DriverProcess:
    """A driver program running, commanded line by line on its stdin."""

    def __init__(self, binary: Path) -> None:
        self.process = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def close(self) -> None:
        assert self.process.stdin
        self.process.stdin.close()
        assert self.process.wait(timeout=10) == 0
