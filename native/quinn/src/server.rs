//! HTTP/3 server: serves the files under a root directory, like quicbed's aioquic server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h3::server::RequestResolver;
use http::{Method, Response, StatusCode};
use quinn::crypto::rustls::QuicServerConfig;
use quinn::rustls;
use quinn::rustls::pki_types::pem::PemObject;
use quinn::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use quinn::{Endpoint, EndpointConfig, Incoming, ServerConfig};
use serde_json::{json, Value};

use crate::args::Options;
use crate::common::{self, Error};
use crate::knobs::Knobs;
use crate::resumption::SingleUseTokens;
use crate::timer;

pub const READY_PREFIX: &str = "quicbed-quic-server ready";
const SERVER_HEADER: &str = "quicbed";
const CLOSE_GRACE: Duration = Duration::from_secs(2);

struct Settings {
    root: PathBuf,
    address: SocketAddr,
    socket_buffer: usize,
    ready_file: Option<PathBuf>,
    stats_file: Option<PathBuf>,
    qlog_dir: Option<PathBuf>,
    idle_timeout: Duration,
    profile: Value,
    knobs: Knobs,
}

/// What is written once per connection (its `--stats-file` line), shared by its tasks.
#[derive(Default)]
struct ConnectionLog {
    requests: AtomicU64,
    body_bytes: AtomicU64,
}

struct Shared {
    settings: Settings,
    config: ServerConfig,
    open: Mutex<HashMap<usize, (quinn::Connection, Arc<ConnectionLog>)>>,
}

const FLAGS: &[&str] = &[];
const OPTIONS: &[&str] = &["root", "cert", "key", "host", "port", "socket-buffer", "ready-file", "stats-file",
                           "qlog-dir", "idle-timeout", "profile-record"];

pub fn main(argv: &[String]) -> Result<(), Error> {
    let options = Options::parse(argv, FLAGS, OPTIONS)?;
    let profile: Value = serde_json::from_str(options.required("profile-record")?)
        .map_err(|e| format!("--profile-record: {e}"))?;
    let knobs = Knobs::from_json(&profile["knobs"])?;
    let host = options.get("host").unwrap_or("0.0.0.0");
    let port: u16 = options.parsed("port", 4433)?;
    let address: SocketAddr = format!("{}:{port}", if host.contains(':') { format!("[{host}]") } else { host.to_owned() })
        .parse().map_err(|_| format!("--host: {host:?} is not an IP address"))?;
    let root = PathBuf::from(options.required("root")?);
    let root = root.canonicalize().map_err(|e| format!("{}: served root: {e}", root.display()))?;
    if !root.is_dir() {
        return Err(format!("{}: served root is not a directory", root.display()).into());
    }
    let settings = Settings {
        root,
        address,
        socket_buffer: options.parsed("socket-buffer", 4 << 20)?,
        ready_file: options.get("ready-file").map(PathBuf::from),
        stats_file: options.get("stats-file").map(PathBuf::from),
        qlog_dir: options.get("qlog-dir").map(PathBuf::from),
        idle_timeout: Duration::from_secs_f64(options.parsed("idle-timeout", 60.0)?),
        profile,
        knobs,
    };
    let tls = tls_config(Path::new(options.required("cert")?), Path::new(options.required("key")?))?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(serve(settings, tls))
}

fn tls_config(cert: &Path, key: &Path) -> Result<Arc<QuicServerConfig>, Error> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: certificate: {e}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{}: private key: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    tls.alpn_protocols = vec![b"h3".to_vec()];
    // session tickets (rustls keeps the sessions in memory by default) that allow 0-RTT: quinn
    // takes early data of any size or none
    tls.max_early_data_size = u32::MAX;
    Ok(Arc::new(QuicServerConfig::try_from(tls)?))
}

/// The endpoint's configuration. It issues one address-validation token per connection
/// (NEW_TOKEN) and accepts each once: a client's next connection, a resumed one, is then
/// validated from its first packet. Every connection's own configuration is a copy of it
/// (`connection_config`), so that the token key that seals a token also opens it.
fn server_config(settings: &Settings, tls: &Arc<QuicServerConfig>) -> Result<ServerConfig, Error> {
    let mut config = ServerConfig::with_crypto(tls.clone());
    let mut tokens = quinn_proto::ValidationTokenConfig::default();
    tokens.log(Arc::new(SingleUseTokens::default())).sent(1);
    config.validation_token_config(tokens);
    config.transport_config(Arc::new(settings.knobs.transport_config(settings.idle_timeout)?));
    Ok(config)
}

/// One connection's configuration: the endpoint's, with its own qlog.
fn connection_config(shared: &Shared, qlog_name: &str) -> Result<ServerConfig, Error> {
    let mut transport = shared.settings.knobs.transport_config(shared.settings.idle_timeout)?;
    common::attach_qlog(&mut transport, shared.settings.qlog_dir.as_deref(), qlog_name, Instant::now())?;
    let mut config = shared.config.clone();
    config.transport_config(Arc::new(transport));
    Ok(config)
}

async fn serve(settings: Settings, tls: Arc<QuicServerConfig>) -> Result<(), Error> {
    let (socket, buffers) = common::bound_socket(settings.address, settings.socket_buffer)?;
    let local = socket.local_addr()?;
    let config = server_config(&settings, &tls)?;
    let endpoint = Endpoint::new(EndpointConfig::default(), Some(config.clone()), socket, timer::runtime(&settings.knobs))?;
    let mut info = json!({
        "host": local.ip().to_string(), "port": local.port(), "pid": std::process::id(),
        "implementation": "quinn", "versions": common::versions(), "socket": buffers,
        "qlog_dir": settings.qlog_dir.as_ref().map(|d| d.display().to_string()),
    });
    for (key, value) in settings.profile.as_object().into_iter().flatten() {
        info[key] = value.clone();
    }
    if let Some(path) = &settings.ready_file {
        common::write_json_atomically(path, &info)?;
    }
    println!("{READY_PREFIX} host={} port={} profile={} knobs={}", local.ip(), local.port(),
             info["profile"].as_str().unwrap_or("?"), info["knobs"]);
    let shared = Arc::new(Shared { settings, config, open: Mutex::new(HashMap::new()) });
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut accepted = 0usize;
    loop {
        tokio::select! {
            incoming = endpoint.accept() => {
                let Some(incoming) = incoming else { break };
                accepted += 1;
                let shared = shared.clone();
                tokio::spawn(async move {
                    if let Err(error) = handle_connection(shared, incoming, accepted).await {
                        eprintln!("connection {accepted}: {error}");
                    }
                });
            }
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
        }
    }
    // close what is open, give the closing handshakes time, then log what never ended
    endpoint.close(0u32.into(), b"server stopping");
    let _ = tokio::time::timeout(CLOSE_GRACE, endpoint.wait_idle()).await;
    let left: Vec<_> = shared.open.lock().unwrap().drain().collect();
    for (_, (connection, log)) in left {
        record_connection(&shared.settings, &connection, &log);
    }
    if let Some(path) = &shared.settings.ready_file {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

async fn handle_connection(shared: Arc<Shared>, incoming: Incoming, number: usize) -> Result<(), Error> {
    let qlog_name = format!("server-{number}-{}", incoming.remote_address()).replace([':', '[', ']'], "_");
    let config = connection_config(&shared, &qlog_name)?;
    // 0.5-RTT: serve at once, so that a resumed client's 0-RTT requests are answered before the
    // handshake completes, as the aioquic server does (a server's into_0rtt always succeeds;
    // rustls' session store hands each ticket out once, so 0-RTT requests are not replayed)
    let connection = match incoming.accept_with(Arc::new(config))?.into_0rtt() {
        Ok((connection, _)) => connection,
        Err(connecting) => connecting.await?,
    };
    let log = Arc::new(ConnectionLog::default());
    shared.open.lock().unwrap().insert(number, (connection.clone(), log.clone()));
    let mut h3 = h3::server::Connection::new(h3_quinn::Connection::new(connection.clone())).await?;
    loop {
        match h3.accept().await {
            Ok(Some(resolver)) => {
                let shared = shared.clone();
                let log = log.clone();
                tokio::spawn(async move {
                    if let Err(error) = answer(&shared.settings.root, resolver, &log).await {
                        eprintln!("request: {error}");
                    }
                });
            }
            Ok(None) => break,
            Err(error) if error.is_h3_no_error() => break,
            Err(_) => break, // the peer went away; its counters are still logged below
        }
    }
    let _ = connection.closed().await;
    if shared.open.lock().unwrap().remove(&number).is_some() {
        record_connection(&shared.settings, &connection, &log);
    }
    Ok(())
}

fn record_connection(settings: &Settings, connection: &quinn::Connection, log: &ConnectionLog) {
    let Some(path) = &settings.stats_file else { return };
    let ssthresh = connection.congestion_state().metrics().ssthresh;
    let mut entry = json!({
        "ended_at": common::wall_clock(),
        "peer": connection.remote_address().to_string(),
        "requests": log.requests.load(Ordering::Relaxed),
        "body_bytes": log.body_bytes.load(Ordering::Relaxed),
        "implementation": "quinn",
        "transport": common::transport_stats(&connection.stats(), ssthresh),
    });
    for (key, value) in settings.profile.as_object().into_iter().flatten() {
        entry[key] = value.clone();
    }
    if let Err(error) = common::append_json_line(path, &entry) {
        eprintln!("{}: {error}", path.display());
    }
}

/// The file under `root` for a request path, or None (missing, outside the root, not a file).
fn resolve_object(root: &Path, request_path: &str) -> Option<PathBuf> {
    let path = request_path.split(['?', '#']).next().unwrap_or("");
    let relative = Path::new(path.trim_start_matches('/'));
    if relative.components().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    let candidate = root.join(relative).canonicalize().ok()?;
    (candidate.starts_with(root) && candidate.is_file()).then_some(candidate)
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("").to_ascii_lowercase().as_str() {
        "html" => "text/html",
        "js" => "application/javascript",
        "css" => "text/css",
        "woff2" => "font/woff2",
        "json" => "application/json",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

async fn answer<C>(root: &Path, resolver: RequestResolver<C, Bytes>, log: &ConnectionLog) -> Result<(), Error>
where
    C: h3::quic::Connection<Bytes>,
{
    let (request, mut stream) = resolver.resolve_request().await?;
    log.requests.fetch_add(1, Ordering::Relaxed);
    let path = request.uri().path().to_owned();
    let (status, body, kind) = if request.method() != Method::GET && request.method() != Method::HEAD {
        (StatusCode::METHOD_NOT_ALLOWED, Bytes::from_static(b"method not allowed\n"), "text/plain")
    } else if let Some(file) = resolve_object(root, &path) {
        (StatusCode::OK, Bytes::from(tokio::fs::read(&file).await?), content_type(&path))
    } else {
        (StatusCode::NOT_FOUND, Bytes::from_static(b"not found\n"), "text/plain")
    };
    let response = Response::builder()
        .status(status)
        .header("server", SERVER_HEADER)
        .header("content-type", kind)
        .header("content-length", body.len())
        .body(())?;
    stream.send_response(response).await?;
    if request.method() != Method::HEAD && !body.is_empty() {
        log.body_bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
        stream.send_data(body).await?;
    }
    stream.finish().await?;
    Ok(())
}
