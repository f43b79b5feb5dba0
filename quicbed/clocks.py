"""The clocks a run can keep, named for every layer (quicbed.host.clock says which one this
kernel keeps)."""

REAL = "real"
VIRTUAL = "virtual"
CLOCKS = (REAL, VIRTUAL)
