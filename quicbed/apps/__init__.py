"""Applications quicbed runs inside emulated hosts, whichever backend built them.

* :mod:`quicbed.apps.transports` - the transport kinds (``kind: quic``, ``kind: tcp``) by
  name: what each reads of an experiment, starts in a run and records for the analysis.
* :mod:`quicbed.apps.quic` - the HTTP/3 endpoints (aioquic with transport profiles, and
  the native quinn endpoint) and their qlog.
* :mod:`quicbed.apps.tcp` - nginx and the HTTP/1.1 and HTTP/2 client, TCP_INFO and
  tcp_probe sampling.
* :mod:`quicbed.apps.objects` - the content served: bulk objects and multi-object pages.
* :mod:`quicbed.apps.record` - what every download client's JSON record shares.
* :mod:`quicbed.apps.capture`, :mod:`quicbed.apps.iperf`, :mod:`quicbed.apps.ping`,
  :mod:`quicbed.apps.udpprobe` - captures, capacity probes and cross traffic, RTT and
  link probes.
* :mod:`quicbed.apps.launch` - the command line that runs one of these Python apps in a
  node; :mod:`quicbed.apps.ports` - waiting until a node listens on a port.
"""
