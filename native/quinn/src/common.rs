//! What server and client share: the UDP socket, qlog files, transport counters, JSON output.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use quinn::{ConnectionStats, QlogConfig, TransportConfig};
use serde_json::{json, Value};
use socket2::{Domain, Protocol, Socket, Type};

pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// A bound UDP socket with large buffers, and the buffer sizes asked for and granted.
pub fn bound_socket(address: SocketAddr, buffer: usize) -> Result<(UdpSocket, Value), Error> {
    let socket = Socket::new(Domain::for_address(address), Type::DGRAM, Some(Protocol::UDP))
        .map_err(|e| format!("UDP socket: {e}"))?;
    // the *FORCE variants pass net.core.{r,w}mem_max (root in the node); the plain ones do not
    if !(force_buffer(&socket, libc::SO_RCVBUFFORCE, buffer) && force_buffer(&socket, libc::SO_SNDBUFFORCE, buffer)) {
        socket.set_recv_buffer_size(buffer)?;
        socket.set_send_buffer_size(buffer)?;
    }
    if address.is_ipv6() && address.ip().is_unspecified() {
        socket.set_only_v6(false)?; // '::' serves IPv4 too, as the aioquic server does
    }
    socket.bind(&address.into()).map_err(|e| format!("cannot bind {address}: {e}"))?;
    let report = json!({
        "requested": buffer,
        // Linux reports twice the size set (bookkeeping overhead); halved to match the request
        "rcvbuf": socket.recv_buffer_size()? / 2,
        "sndbuf": socket.send_buffer_size()? / 2,
    });
    Ok((socket.into(), report))
}

fn force_buffer(socket: &Socket, option: libc::c_int, size: usize) -> bool {
    use std::os::fd::AsRawFd;
    let value = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    // SAFETY: setsockopt reads an int from a valid pointer for the given length
    unsafe {
        libc::setsockopt(socket.as_raw_fd(), libc::SOL_SOCKET, option, (&value as *const libc::c_int).cast(),
                         std::mem::size_of::<libc::c_int>() as libc::socklen_t) == 0
    }
}

/// Names the producer in every qlog file: quinn logs only the fields that changed, and ssthresh
/// only from quicbed's controllers once slow start ended (its RTTs are in milliseconds, as qlog
/// says, with patches/quinn-proto-qlog-rtt-ms.patch; files from before it say "RTTs in
/// seconds"); quicbed.analysis.qlog knows the file by this.
const QLOG_DESCRIPTION: &str = "quicbed-quinn: changed fields only";

/// Streams a connection's qlog (JSON-SEQ) to `DIR/NAME.sqlog` through the transport config.
pub fn attach_qlog(transport: &mut TransportConfig, dir: Option<&Path>, name: &str, start: Instant) -> Result<Option<PathBuf>, Error> {
    let Some(dir) = dir else { return Ok(None) };
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(format!("{name}.sqlog"));
    let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    // event times are relative to `start`: its epoch puts them on the captures' clock
    let epoch = SystemTime::now().duration_since(UNIX_EPOCH).map(|now| now.saturating_sub(start.elapsed()))
        .unwrap_or_default().as_secs_f64();
    let mut config = QlogConfig::default();
    config.writer(Box::new(BufWriter::with_capacity(1 << 16, file))).title(Some(name.to_owned()))
        .description(Some(format!("{QLOG_DESCRIPTION}; start {epoch:.6} s since the epoch")))
        .start_time(start);
    transport.qlog_stream(config.into_stream());
    Ok(Some(path))
}

/// The record's `transport` counters, in the names the aioquic endpoints use where the
/// meaning is the same (seconds, bytes).
pub fn transport_stats(stats: &ConnectionStats, ssthresh: Option<u64>) -> Value {
    json!({
        "datagrams_sent": stats.udp_tx.datagrams,
        "datagrams_received": stats.udp_rx.datagrams,
        "bytes_sent": stats.udp_tx.bytes,
        "bytes_received": stats.udp_rx.bytes,
        "packets_sent": stats.path.sent_packets,
        "ack_frames_sent": stats.frame_tx.acks,
        "ack_frames_received": stats.frame_rx.acks,
        "ack_frequency_frames_sent": stats.frame_tx.ack_frequency,
        "ack_frequency_frames_received": stats.frame_rx.ack_frequency,
        "packets_lost": stats.path.lost_packets,
        "congestion_events": stats.path.congestion_events,
        "rtt_min": seconds(stats.path.min_rtt.as_secs_f64()),
        "rtt_smoothed": seconds(stats.path.rtt.as_secs_f64()),
        "cwnd": stats.path.cwnd,
        "ssthresh": ssthresh,
        "mtu_probes_sent": stats.path.sent_plpmtud_probes,
    })
}

fn seconds(value: f64) -> Value {
    if value > 0.0 && value.is_finite() { json!(value) } else { Value::Null }
}

pub fn wall_clock() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Writes JSON to `path` through a temporary file, so a reader never sees half of it.
pub fn write_json_atomically(path: &Path, value: &Value) -> Result<(), Error> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    let temporary = path.with_extension("tmp");
    fs::write(&temporary, serde_json::to_string_pretty(value)? + "\n")?;
    fs::rename(&temporary, path)?;
    Ok(())
}

pub fn append_json_line(path: &Path, value: &Value) -> Result<(), Error> {
    let mut file = fs::OpenOptions::new().create(true).append(true).open(path)?;
    writeln!(file, "{value}")?;
    Ok(())
}

/// The versions a record names: this binary's, quinn's and h3's (pinned in Cargo.toml).
pub fn versions() -> Value {
    json!({"quicbed_quinn": env!("CARGO_PKG_VERSION"), "quinn": "0.11.12", "quinn_proto": "0.11.19", "h3": "0.0.8"})
}
