"""Self-signed TLS certificates for quicbed's QUIC servers (tests and emulated hosts).

``python -m quicbed.apps.quic.certs --out DIR`` writes ``DIR/cert.pem`` and ``DIR/key.pem``.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import NameOID

KEY_TYPES = ("ec", "ed25519")


@dataclass(frozen=True)
class SelfSigned:
    certificate: x509.Certificate
    private_key: ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey

    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def private_key_pem(self) -> bytes:
        return self.private_key.private_bytes(
            encoding=serialization.Encoding.PEM,
            format=serialization.PrivateFormat.PKCS8,
            encryption_algorithm=serialization.NoEncryption(),
        )


def generate(
    names: Sequence[str] = ("localhost", "127.0.0.1", "::1"), valid_days: int = 3650, key_type: str = "ec"
) -> SelfSigned:
    """A self-signed certificate for ``names`` (DNS names or IP addresses).

    ``key_type`` "ec" (ECDSA P-256, what every TLS stack accepts) or "ed25519", whose
    signatures have a fixed length: handshakes then have the same sizes run after run,
    which keeps virtual-clock experiments bit-for-bit reproducible.
    """
    if key_type not in KEY_TYPES:
        raise ValueError(f"key_type must be one of {', '.join(KEY_TYPES)}")
    key: ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey = (
        ec.generate_private_key(ec.SECP256R1()) if key_type == "ec" else ed25519.Ed25519PrivateKey.generate()
    )
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    alternative: list[x509.GeneralName] = []
    for name in names:
        try:
            alternative.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alternative.append(x509.DNSName(name))
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=valid_days))
        .add_extension(x509.SubjectAlternativeName(alternative), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256() if key_type == "ec" else None)
    )
    return SelfSigned(certificate=certificate, private_key=key)


def write(directory: str | Path, names: Sequence[str] = ("localhost", "127.0.0.1", "::1")) -> tuple[Path, Path]:
    """Write ``cert.pem`` and ``key.pem`` into ``directory``; return their paths."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    pair = generate(names)
    cert_path, key_path = target / "cert.pem", target / "key.pem"
    cert_path.write_bytes(pair.certificate_pem())
    key_path.write_bytes(pair.private_key_pem())
    key_path.chmod(0o600)
    return cert_path, key_path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m quicbed.apps.quic.certs", description="Write a self-signed certificate and key."
    )
    parser.add_argument("--out", required=True, help="directory for cert.pem and key.pem")
    parser.add_argument(
        "--name",
        action="append",
        default=[],
        help="DNS name or IP address (repeatable; default localhost, 127.0.0.1, ::1)",
    )
    args = parser.parse_args(argv)
    cert_path, key_path = write(args.out, args.name or ("localhost", "127.0.0.1", "::1"))
    print(f"{cert_path}\n{key_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
