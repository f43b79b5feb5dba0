"""TCP endpoints: nginx as the HTTP/1.1 and HTTP/2 server, and a client of quicbed's own.

* :mod:`quicbed.apps.tcp.nginx` - one nginx instance per server node, its own config and
  run folder, serving the same content tree as the HTTP/3 server.
* :mod:`quicbed.apps.tcp.client` - ``python -m quicbed.apps.tcp.client``: fetch an object or a
  page, write the same JSON record layout as the HTTP/3 client.
* :mod:`quicbed.apps.tcp.settings` - what the client is asked to fetch (shared by its python
  and curl engines).
* :mod:`quicbed.apps.tcp.fetch_record` - the client's record: its layout, the TCP_INFO
  summary, object times as offsets, and the verdict.
* :mod:`quicbed.apps.tcp.python_engine` - the client's own engine (the default), built from
  :mod:`~quicbed.apps.tcp.tls` (SSL context, session-ticket priming),
  :mod:`~quicbed.apps.tcp.connect` (opening one connection),
  :mod:`~quicbed.apps.tcp.connection` (what its connections share),
  :mod:`~quicbed.apps.tcp.http1` and :mod:`~quicbed.apps.tcp.http2`.
* :mod:`quicbed.apps.tcp.tcpinfo` - TCP_INFO of a namespace's sockets over netlink (what
  ``ss -ti`` shows), once or sampled over time.
* :mod:`quicbed.apps.tcp.curl` - the client's alternative engine (``--engine curl``).
* :mod:`quicbed.apps.tcp.port_cc` - a congestion control for one server port.
* :mod:`quicbed.apps.tcp.tracepoints` - the kernel's tcp_probe tracepoint (cwnd, ssthresh
  over time).
"""
