"""The ns3 backend: an ns-3 real-time process simulates 802.11 cells, meshes and cables;
namespaces plug into it through TAP devices. See ``quicbed.backends.ns3.network``."""
