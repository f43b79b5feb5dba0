"""QUIC and HTTP/3 endpoints on aioquic with switchable transport profiles (QUIC, BQUIC).

Modules: ``profiles`` (transport profiles and knobs), ``implementations`` (aioquic and
quinn by name, and the knob values each refuses), ``aioquic_hooks`` (the only code that
touches aioquic internals), ``qlog`` (filtered qlog), ``server``/``client`` (HTTP/3
endpoints, runnable with ``python -m``), ``virtual_link`` (in-memory, virtual-clock
connection pairs for deterministic tests), ``certs`` (self-signed certificates),
``sockets`` (UDP sockets with large buffers).
"""
