"""The native QUIC endpoints (quinn + h3, ``native/quinn``) behind the aioquic endpoints' options.

    python -m quicbed.apps.quic.native server --root /srv/quicbed --cert cert.pem --key key.pem \\
        --profile quic --ready-file ready.json
    python -m quicbed.apps.quic.native client --host 10.0.0.2 --path /bulk/10MB.bin --ca-cert cert.pem

The options, the ready file, the ``--stats-file`` lines and the client's record are those
of ``quicbed.apps.quic.server`` and ``.client``; records add ``"implementation": "quinn"``
and the versions. This module resolves the transport profile, refuses knobs quinn cannot
honour (quicbed.apps.quic.implementations), waits at the start barrier, then replaces
itself with the binary, so the process that runs (and is measured) is the native one.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence

from quicbed.apps.client_device import device_cost
from quicbed.apps.quic import client as aioquic_client
from quicbed.apps.quic import server as aioquic_server
from quicbed.apps.quic.implementations import quic_implementation, require_native_binary
from quicbed.apps.quic.profiles import profile_from_arguments
from quicbed.apps.quic.sockets import resolve
from quicbed.apps.record import base_record
from quicbed.errors import QuicbedError
from quicbed.host.clock import current_clock
from quicbed.spec.units import parse_size

USAGE = "usage: python -m quicbed.apps.quic.native server|client [options of quicbed.apps.quic.server/client]"


def server_argv(argv: Sequence[str]) -> list[str]:
    """The binary's command line for the aioquic server's options."""
    parser = aioquic_server.build_parser()
    parser.prog = "python -m quicbed.apps.quic.native server"
    parser.description = "Serve a directory over HTTP/3 (quinn)."
    args = parser.parse_args(argv)
    profile = profile_from_arguments(args)
    quic_implementation("quinn").require_supported(profile)
    command = [
        str(require_native_binary()),
        "server",
        "--root",
        str(args.root),
        "--cert",
        str(args.cert),
        "--key",
        str(args.key),
        "--host",
        args.host,
        "--port",
        str(args.port),
        "--socket-buffer",
        str(parse_size(args.socket_buffer, "--socket-buffer")),
        "--idle-timeout",
        str(args.idle_timeout),
        "--profile-record",
        json.dumps(profile.record()),
    ]
    for option, value in (("--ready-file", args.ready_file), ("--stats-file", args.stats_file)):
        if value is not None:
            command += [option, str(value)]
    if args.qlog_dir is not None and args.qlog_mode != "off":
        command += ["--qlog-dir", str(args.qlog_dir)]
    return command


def client_argv(argv: Sequence[str]) -> list[str]:
    """The binary's command line for the aioquic client's options, after the start barrier."""
    parser = aioquic_client.build_parser()
    parser.prog = "python -m quicbed.apps.quic.native client"
    parser.description = "Fetch objects over HTTP/3 (quinn) and record timings."
    args = parser.parse_args(argv)
    settings = aioquic_client.settings_from_arguments(args)
    quic_implementation("quinn").require_supported(settings.profile)
    binary = require_native_binary()
    _, address = resolve(settings.host, settings.port)
    record = base_record("quicbed-quic-client", settings)
    record.update({"protocol": "h3", **settings.profile.record()})
    device = []
    if settings.device is not None:  # the binary sleeps what each datagram costs beyond this host's own time
        cost = device_cost(settings.device, "quinn", current_clock())
        record["device"] = cost.record()
        device = ["--receive-cost", repr(cost.added_per_received), "--send-cost", repr(cost.added_per_sent)]
    command = [
        str(binary),
        "client",
        "--record-template",
        json.dumps(record),
        "--address",
        address[0],
        "--socket-buffer",
        str(settings.socket_buffer),
    ]
    if settings.server_name:
        command += ["--server-name", settings.server_name]
    if settings.insecure:
        command.append("--insecure")
    elif settings.ca_file is not None:
        command += ["--ca-cert", str(settings.ca_file)]
    if settings.keylog is not None:
        command += ["--keylog", str(settings.keylog)]
    if settings.bind:
        command += ["--bind", settings.bind]
    if settings.qlog_dir is not None and settings.qlog_mode != "off":
        command += ["--qlog-dir", str(settings.qlog_dir)]
    if args.output is not None:
        command += ["--output", str(args.output)]
    command += device
    barrier = settings.barrier
    if not settings.primes:
        barrier.wait()
    else:  # the binary passes the barrier itself, after its priming connection
        for option, path in (("--ready-file", barrier.ready_file), ("--start-file", barrier.start_file)):
            if path is not None:
                command += [option, str(path)]
    return command


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    builders = {"server": server_argv, "client": client_argv}
    if not argv or argv[0] not in builders:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        command = builders[argv[0]](argv[1:])
    except (QuicbedError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    os.execv(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
