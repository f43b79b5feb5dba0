"""802.11n/ac/ax through the ns3 backend next to the analytical MAC model (prints figures).

    sudo python bench/wifi.py                       # 802.11n MCS 0, 3, 5, 7; ~2.5 minutes
    sudo python bench/wifi.py --mcs 7 --seconds 8 --json out.json
    sudo python bench/wifi.py --standard 802.11ax --width 40 --mcs 7,11   # HE: A-MPDUs of up to 256

One station, one AP, the server behind the AP on a 1 Gbit/s cable (topologies/wifi_ap.py),
downloads (AP -> station). For each MCS: saturated UDP and TCP goodput measured through the
simulated channel next to the analytical throughput of a saturated sender with and without
A-MPDU (quicbed/backends/ns3/airtime.py); then TCP with A-MPDU on vs off; then the airtime
paced and bursty UDP use at the same offered rate; with the ns-3 process's CPU use and its
lag behind the wall clock for every point.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quicbed.apps import iperf  # noqa: E402
from quicbed.apps.iperf import UDP_PAYLOAD  # noqa: E402
from quicbed.backends.ns3 import airtime, build  # noqa: E402
from quicbed.backends.ns3.network import Ns3Network  # noqa: E402
from quicbed.spec.loader import load_topology  # noqa: E402

TCP_PAYLOAD = 1448


def topology(**params):
    return load_topology(str(ROOT / "topologies" / "wifi_ap.py"), params)


def measure(params: dict, seconds: float, **flow) -> dict:
    """One network, one flow; goodput plus the MAC statistics of that flow."""
    with Ns3Network(topology(**params)) as network:
        network.reset_stats()
        result = iperf.between(network, "sta1", "server", duration=seconds, **flow)
        stats = network.mac_stats()
    ap = stats["radios"]["ap1:wifi"]
    busy = sum(r["airtime_s"]["total"] for r in stats["radios"].values())
    return {
        "goodput": result.throughput,
        "offered": result.sent_bps,
        "lost_percent": result.lost_percent,
        "mpdus_per_ampdu": ap["mpdus_per_ampdu"]["mean"],
        "retries": ap["retries"],
        "queue_drops": ap["queue_drops"],
        "airtime_ap": ap["airtime_share"],
        "airtime_channel": busy / stats["interval"]["sim_s"],
        "cpu": stats["cpu_share"],
        "lag_max": stats["lag"]["max_ms"],
        "lag_mean": stats["lag"]["mean_ms"],
        "valid": stats["valid"],
    }


def mbit(value: float) -> str:
    return f"{value / 1e6:6.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mcs", default="0,3,5,7", help="comma-separated MCS values (default 0,3,5,7)")
    parser.add_argument("--standard", default="802.11n", choices=("802.11n", "802.11ac", "802.11ax"))
    parser.add_argument("--width", default=20, type=int, choices=(20, 40, 80, 160), help="channel width, MHz")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each flow (default 5)")
    parser.add_argument("--band", default="5GHz", choices=("2.4GHz", "5GHz", "6GHz"))
    parser.add_argument(
        "--guard-interval",
        default="long",
        choices=("long", "short", "1.6us", "3.2us"),
        help="long/short (802.11n/ac), long (0.8 us), 1.6us or 3.2us (802.11ax)",
    )
    parser.add_argument("--paced-rate", default=20e6, type=float, help="offered UDP rate, paced vs bursty (bit/s)")
    parser.add_argument("--json", type=Path, help="also write all figures here")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("bench/wifi.py needs root (namespaces, TAP devices): sudo python bench/wifi.py", file=sys.stderr)
        return 2
    reason = build.missing()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    build.ensure_built(quiet=False)
    base = {
        "band": args.band,
        "channel": {"5GHz": 36, "6GHz": 37}.get(args.band, 6),
        "guard_interval": args.guard_interval,
        "standard": args.standard,
        "width": args.width,
    }
    figures: dict = {"settings": {**base, "seconds": args.seconds}, "mcs": {}}

    def phy_of(mcs: int) -> airtime.Phy:
        return airtime.Phy(
            mcs=mcs, standard=args.standard, band=args.band, width=args.width, guard_interval=args.guard_interval
        )

    started = time.monotonic()

    print(
        f"## {args.standard} {args.width} MHz {args.band}, {args.guard_interval} GI, one station, download AP -> station, "
        f"{args.seconds:g} s per point"
    )
    print("analytical: one saturated sender, mean backoff, no collisions (quicbed/backends/ns3/airtime.py)\n")
    print("MCS  PHY     analytical Mbit/s   measured Mbit/s        UDP/      MPDUs/A-MPDU  ns-3   lag max")
    print("     Mbit/s  A-MPDU   no agg.    UDP      TCP           analyt.   UDP    TCP    CPU    ms (UDP/TCP)")
    for mcs in [int(m) for m in args.mcs.split(",")]:
        phy = phy_of(mcs)
        with_ampdu = airtime.saturated_throughput(UDP_PAYLOAD, phy)
        without = airtime.saturated_throughput(UDP_PAYLOAD, phy, ampdu=False)
        params = {**base, "mcs": mcs}
        udp = measure(params, args.seconds, rate=1.25 * with_ampdu.goodput + 1e6)
        tcp = measure(params, args.seconds)
        ratio = udp["goodput"] / with_ampdu.goodput
        print(
            f"{mcs:<4d} {mbit(airtime.data_rate(phy))}  {mbit(with_ampdu.goodput)}   {mbit(without.goodput)}"
            f"     {mbit(udp['goodput'])}   {mbit(tcp['goodput'])}        {ratio:5.2f}{'' if abs(ratio - 1) <= 0.15 else '!'}"
            f"    {udp['mpdus_per_ampdu']:5.1f}  {tcp['mpdus_per_ampdu']:5.1f}  {max(udp['cpu'], tcp['cpu']):4.0%}"
            f"   {udp['lag_max']:.1f}/{tcp['lag_max']:.1f}",
            flush=True,
        )
        figures["mcs"][mcs] = {
            "phy_rate": airtime.data_rate(phy),
            "analytical_ampdu": with_ampdu.goodput,
            "analytical_ampdu_mpdus": with_ampdu.mpdus,
            "analytical_no_aggregation": without.goodput,
            "analytical_tcp": airtime.saturated_throughput(TCP_PAYLOAD, phy, headers=airtime.IP_TCP_HEADERS).goodput,
            "udp": udp,
            "tcp": tcp,
            "udp_over_analytical": ratio,
        }

    mcs = max(int(m) for m in args.mcs.split(","))
    phy = phy_of(mcs)
    print(f"\n## TCP goodput with A-MPDU on vs off (MCS {mcs})")
    on = figures["mcs"].get(mcs, {}).get("tcp") or measure({**base, "mcs": mcs}, args.seconds)
    off = measure({**base, "mcs": mcs, "ampdu": False}, args.seconds)
    print(
        f"A-MPDU on   {mbit(on['goodput'])} Mbit/s  ({on['mpdus_per_ampdu']:.1f} MPDUs per A-MPDU, "
        f"{on['retries']} retried MPDUs)"
    )
    print(
        f"A-MPDU off  {mbit(off['goodput'])} Mbit/s  (analytical UDP without aggregation "
        f"{mbit(airtime.saturated_throughput(UDP_PAYLOAD, phy, ampdu=False).goodput).strip()}; "
        f"TCP ACKs share the channel)"
    )
    print(f"off / on    {off['goodput'] / on['goodput']:.2f}")
    figures["ampdu_on_off"] = {"on": on, "off": off}

    rate = args.paced_rate
    print(f"\n## Paced vs bursty UDP at the same offered rate ({rate / 1e6:g} Mbit/s, MCS {mcs})")
    print("          delivered  channel airtime  MPDUs/A-MPDU  analytical airtime  ns-3 CPU  lag max ms")
    figures["paced_bursty"] = {}
    for name, flow in (("paced", {"pacing_timer_us": 100}), ("bursty", {"burst": 64})):
        result = measure({**base, "mcs": mcs}, args.seconds, rate=rate, **flow)
        packets = result["goodput"] * args.seconds / 8 / UDP_PAYLOAD
        model = airtime.airtime_of(packets, UDP_PAYLOAD, phy, result["mpdus_per_ampdu"]) / args.seconds
        print(
            f"{name:<9} {mbit(result['goodput'])}     {result['airtime_channel']:6.1%}           "
            f"{result['mpdus_per_ampdu']:5.1f}         {model:6.1%}             {result['cpu']:4.0%}      "
            f"{result['lag_max']:.1f}",
            flush=True,
        )
        figures["paced_bursty"][name] = {**result, "analytical_airtime": model}

    every = [p for m in figures["mcs"].values() for p in (m["udp"], m["tcp"])] + [off]
    every += list(figures["paced_bursty"].values())
    print(
        f"\n## ns-3 process: CPU share {min(p['cpu'] for p in every):.0%}-{max(p['cpu'] for p in every):.0%} "
        f"of one core; lag max {max(p['lag_max'] for p in every):.1f} ms, mean "
        f"{sum(p['lag_mean'] for p in every) / len(every):.2f} ms; "
        f"{sum(not p['valid'] for p in every)} of {len(every)} points flagged for time behind real time; "
        f"bench took {time.monotonic() - started:.0f} s"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
