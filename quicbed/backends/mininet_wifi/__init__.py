"""mininet-wifi backend: the Linux 802.11 stack (mac80211_hwsim radios, hostapd,
wpa_supplicant, 802.11s mesh in the kernel) through Mininet-WiFi.

    with MininetWifiNetwork(load_topology("topologies/wifi_ap.py")) as network:
        network.node("server").start(["iperf3", "-s"])
        network.node("sta1").run(["ping", "-c", "3", network.node("server").address])

Use it for "does it work over real WiFi" questions (association, hostapd, 802.11s HWMP,
mobility, signal-based rates); use the ns3 backend for airtime, A-MPDU and CSMA/CA effects
on transport. Mininet-WiFi models no aggregation and no contention timing.

Design
------
*Translation (pure, unit-tested, ``plan.py``).* :func:`plan` turns a resolved Topology into what
Mininet-WiFi is asked to build: access points (OVS in ``failMode='standalone'``, so no
OpenFlow controller), stations, hosts, switches (OVS bridges), 802.11 modes and HT
capabilities (802.11n in 2.4 GHz is Mininet-WiFi's mode ``n2``, in 5 GHz ``n``), one mesh
radio per mesh point and channel, and the mesh peerings to forbid so that only declared
links peer (``iw ... plink_action block``): a 3-node chain on one channel then forwards
over two 802.11s hops (HWMP), not one.

*Same addresses and names as every backend.* Mininet-WiFi's own addressing is switched
off; quicbed sets ``topo.resolve()``'s addresses and routes. Wired interfaces of hosts get
the resolved names (``eth0``); radio interfaces keep Mininet-WiFi's names (``sta1-wlan0``,
``mp1-mp0``, used by its hostapd/wpa_supplicant/iw calls) and get the resolved name as an
alternative name (``ip link property add altname wlan0``), so ``tcpdump -i wlan0``,
``tc``, ``ip`` and ``ethtool`` work unchanged. A mesh point with radios on several
channels bridges them in a bridge named as the resolved interface (``mesh0``).

*Stations that move and roam* (``motion.py``). quicbed sets a moving station's position along
its trajectory from the transfer's start (``start_trajectories``); under wmediumd the signal
follows. A station linked to several APs of one SSID joins them as one WPA2 network, and its
own wpa_supplicant roams by background scans (``bgscan``); the APs' hostapd logs say when
(``association_events``).

*Wired links* are plain veth pairs from Mininet; their shapes are quicbed's own tc
commands (:mod:`quicbed.backends.tc`), so rate, netem and Gilbert-Elliott loss mean
exactly what they mean on the netns backend.

*Known pitfalls, handled* (``host.py``). Mininet >= 2.3.1b2 and FlightRadarAPI < 1.6 are checked before
anything is built; Open vSwitch must run (or :class:`PrivateOpenVSwitch` starts one, the
default inside the microVM whose /run is private); 802.11n/ac under wmediumd gives a
warning (wmediumd treats MCS indexes as legacy rates); wmediumd's control socket is
waited for; a station whose single Mininet-WiFi connect failed (seen under wmediumd in the
slow microVM) gets its connect re-issued after ``association_retry_s``; ``stop()`` runs
under a watchdog and orphaned hostapd/wpa_supplicant are reaped (this process is their
subreaper). Mininet-WiFi's cleanup kills hostapd and wpa_supplicant machine-wide and
unloads mac80211_hwsim: one Mininet-WiFi network at a time per machine, enforced by a
lock file.
"""

from quicbed.backends.mininet_wifi.host import (
    ExclusiveLock,
    PrivateOpenVSwitch,
    check_requirements,
    import_problem,
    networkmanager_leaves_hwsim_alone,
    networkmanager_problem,
    ovs_running,
    versions,
    wait_for_wmediumd_socket,
)
from quicbed.backends.mininet_wifi.network import MininetNode, MininetWifiNetwork
from quicbed.backends.mininet_wifi.plan import (
    MininetWifiOptions,
    WifiPlan,
    ht_capab,
    mesh_ht_cap,
    mode_of,
    plan,
    ignored_settings_warnings,
    wmediumd_warnings,
)

__all__ = [
    "ExclusiveLock",
    "MininetNode",
    "MininetWifiNetwork",
    "MininetWifiOptions",
    "WifiPlan",
    "PrivateOpenVSwitch",
    "check_requirements",
    "ht_capab",
    "import_problem",
    "mesh_ht_cap",
    "mode_of",
    "networkmanager_leaves_hwsim_alone",
    "networkmanager_problem",
    "ovs_running",
    "plan",
    "versions",
    "wait_for_wmediumd_socket",
    "ignored_settings_warnings",
    "wmediumd_warnings",
]
