"""Applications quicbed runs inside emulated hosts: QUIC/HTTP/3 endpoints and served content."""
