"""Registers the ``provisioning`` marker used by tests/provisioning/test_playbook.py."""

from __future__ import annotations


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "provisioning: provisions the machine the tests run on with site.yml (apt packages, sysctls, "
        "/opt/quicbed/venv); deselect with -m 'not provisioning' or QUICBED_SKIP_PROVISIONING=1",
    )
