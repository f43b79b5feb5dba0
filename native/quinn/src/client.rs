//! HTTP/3 client: fetches objects over one connection, at most `parallel` at a time, and
//! fills in the record quicbed's Python side started (the same record as the aioquic client).
//! With `request.resumption` (ticket, 0rtt) a priming connection first fetches a missing
//! object to receive the server's session tickets; the measured connection then resumes
//! (and with 0rtt sends its requests as 0-RTT data), and the record's times start at it.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Buf;
use quinn::crypto::rustls::QuicClientConfig;
use quinn::rustls;
use quinn::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use quinn::rustls::pki_types::pem::PemObject;
use quinn::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use quinn::{ClientConfig, Endpoint, EndpointConfig};
use serde_json::{json, Value};

use crate::args::Options;
use crate::common::{self, Error};
use crate::device::{self, Meter, PacketCost};
use crate::knobs::Knobs;
use crate::resumption::{CountingStore, CountingTokens, Mode};
use crate::timer;

const CLOSE_WAIT: Duration = Duration::from_secs(2);
const USER_AGENT: &str = concat!("quicbed-quinn/", env!("CARGO_PKG_VERSION"));
/// what the priming connection asks for: nothing the server has, so its answer is small
const PRIMING_PATH: &str = "/.quicbed-priming";
/// how long the priming connection waits for a session ticket after its answer
const TICKET_WAIT: Duration = Duration::from_secs(1);

struct Settings {
    address: SocketAddr,
    authority: String,
    server_name: String,
    paths: Vec<String>,
    parallel: usize,
    timeout: Duration,
    ca_cert: Option<PathBuf>,
    insecure: bool,
    keylog: Option<PathBuf>,
    bind: Option<String>,
    socket_buffer: usize,
    qlog_dir: Option<PathBuf>,
    knobs: Knobs,
    /// a weak device's time per datagram (`--receive-cost`, `--send-cost`), or None
    device: Option<Arc<Meter>>,
    resumption: Mode,
    /// the start barrier, passed after the priming connection (quicbed.apps.record.StartBarrier)
    ready_file: Option<PathBuf>,
    start_file: Option<PathBuf>,
}

#[derive(Clone, Debug)]
struct ObjectTiming {
    path: String,
    start: Instant,
    status: Option<u16>,
    first_byte: Option<Instant>,
    end: Option<Instant>,
    size: u64,
}

const FLAGS: &[&str] = &["insecure"];
const OPTIONS: &[&str] = &["record-template", "address", "server-name", "ca-cert", "keylog", "bind",
                           "socket-buffer", "qlog-dir", "output", "ready-file", "start-file",
                           "receive-cost", "send-cost"];

pub fn main(argv: &[String]) -> Result<bool, Error> {
    let options = Options::parse(argv, FLAGS, OPTIONS)?;
    let mut record: Value = serde_json::from_str(options.required("record-template")?)
        .map_err(|e| format!("--record-template: {e}"))?;
    let knobs = Knobs::from_json(&record["knobs"])?;
    let port = record["server"]["port"].as_u64().ok_or("record-template: server.port missing")? as u16;
    let host = record["server"]["host"].as_str().ok_or("record-template: server.host missing")?.to_owned();
    let ip = options.required("address")?;
    let address: SocketAddr = SocketAddr::new(ip.parse().map_err(|_| format!("--address: {ip:?} is not an IP address"))?, port);
    let request = &record["request"];
    let settings = Settings {
        address,
        authority: format!("{}:{port}", options.get("server-name").unwrap_or(&host)),
        server_name: options.get("server-name").unwrap_or(&host).to_owned(),
        paths: request["paths"].as_array().ok_or("record-template: request.paths missing")?
            .iter().filter_map(|p| p.as_str().map(str::to_owned)).collect(),
        parallel: request["parallel"].as_u64().unwrap_or(6).max(1) as usize,
        timeout: Duration::from_secs_f64(request["timeout"].as_f64().unwrap_or(60.0)),
        ca_cert: options.get("ca-cert").map(PathBuf::from),
        insecure: options.flag("insecure"),
        keylog: options.get("keylog").map(PathBuf::from),
        bind: options.get("bind").filter(|b| !b.is_empty()).map(str::to_owned),
        socket_buffer: options.parsed("socket-buffer", 4 << 20)?,
        qlog_dir: options.get("qlog-dir").map(PathBuf::from),
        knobs,
        device: PacketCost::from_seconds(options.parsed("receive-cost", 0.0)?, options.parsed("send-cost", 0.0)?)?
            .map(Meter::new),
        resumption: Mode::parse(request["resumption"].as_str())?,
        ready_file: options.get("ready-file").map(PathBuf::from),
        start_file: options.get("start-file").map(PathBuf::from),
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(fetch(&settings, &mut record));
    let text = serde_json::to_string_pretty(&record)? + "\n";
    match options.get("output") {
        Some(path) => {
            if let Some(parent) = Path::new(path).parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, text)?;
        }
        None => print!("{text}"),
    }
    if let Some(error) = record["error"].as_str() {
        eprintln!("error: {error}");
    }
    Ok(record["ok"].as_bool() == Some(true))
}

async fn fetch(settings: &Settings, record: &mut Value) {
    let mut origin = Instant::now();
    record["started_at"] = json!(common::wall_clock());
    record["server"]["address"] = json!(settings.address.ip().to_string());
    record["implementation"] = json!("quinn");
    record["versions"] = common::versions();
    let objects: Arc<Mutex<Vec<ObjectTiming>>> = Arc::default();
    let store = CountingStore::new();
    let tokens = CountingTokens::new(); // the priming connection's address-validation token, for the measured one
    let early: Arc<Mutex<Option<(Instant, bool)>>> = Arc::default(); // 0-RTT: when the handshake ended, accepted
    let mut connection = None;
    let mut endpoint = None;
    let mut handshake_at = None;
    let mut qlog = None;
    // the endpoint, then a resumed run's priming connection and start barrier, bounded apart
    // from the measured connection (the timeout is the measured connection's)
    let opened = async {
        let (socket, buffers) = common::bound_socket(local_address(settings)?, settings.socket_buffer)?;
        record["socket"] = buffers;
        let mut runtime = timer::runtime(&settings.knobs);
        if let Some(meter) = &settings.device {
            runtime = Arc::new(device::Costly { inner: runtime, meter: meter.clone() });
        }
        let opened = Endpoint::new(EndpointConfig::default(), None, socket, runtime)?;
        let tls = Arc::new(QuicClientConfig::try_from(tls_config(settings, store.clone())?)?);
        endpoint = Some(opened.clone());
        if settings.resumption != Mode::None {
            record["resumption"]["priming"] = tokio::time::timeout(settings.timeout, prime(settings, &opened, tls.clone(), &store, tokens.clone()))
                .await
                .map_err(|_| format!("priming connection: timeout after {}s", settings.timeout.as_secs_f64()))?;
            pass_barrier(settings).await?; // primed: the run's captures may start now
            origin = Instant::now(); // the measured connection's times start here
            record["started_at"] = json!(common::wall_clock());
        }
        Ok::<_, Error>((opened, tls))
    }
    .await;
    let outcome = match opened {
        Err(error) => Ok(Err(error)),
        Ok((opened, tls)) => tokio::time::timeout(settings.timeout, async {
            let mut transport = settings.knobs.transport_config(Duration::from_secs(60))?;
            qlog = common::attach_qlog(&mut transport, settings.qlog_dir.as_deref(), "client", origin)?;
            let mut config = ClientConfig::new(tls);
            config.transport_config(Arc::new(transport)).token_store(tokens.clone());
            let connecting = opened.connect_with(config, settings.address, &settings.server_name)?;
            let established = match connecting.into_0rtt() {
                Ok((early_connection, accepted)) if settings.resumption == Mode::ZeroRtt => {
                    let early = early.clone();
                    tokio::spawn(async move {
                        let accepted = accepted.await;
                        *early.lock().unwrap() = Some((Instant::now(), accepted));
                    });
                    early_connection
                }
                Ok((unwanted, _)) => {
                    unwanted.close(0u32.into(), b"0-RTT not asked for");
                    return Err("a 0-RTT connection was opened unasked".into());
                }
                Err(connecting) => {
                    let established = connecting.await?;
                    handshake_at = Some(Instant::now());
                    established
                }
            };
            connection = Some(established.clone());
            download(settings, established, objects.clone()).await
        })
        .await,
    };
    match outcome {
        Ok(Ok(())) => record["ok"] = json!(true),
        Ok(Err(error)) => record["error"] = json!(error.to_string()),
        Err(_) => record["error"] = json!(format!("timeout after {}s", settings.timeout.as_secs_f64())),
    }
    let early = *early.lock().unwrap();
    if let Some((ended, _)) = early {
        handshake_at = Some(ended);
    }
    if settings.resumption != Mode::None {
        record["resumption"]["asked"] = json!(settings.resumption.name());
        record["resumption"]["tickets_received"] = json!(store.received());
        record["resumption"]["ticket_offered"] = json!(store.offered() > 0);
        record["resumption"]["early_data_accepted"] = early.map_or(Value::Null, |(_, accepted)| json!(accepted));
        record["resumption"]["address_tokens_received"] = json!(tokens.received());
        record["resumption"]["address_token_offered"] = json!(tokens.offered() > 0);
    }
    let timings = {
        let mut all = objects.lock().unwrap().clone();
        all.sort_by_key(|t| t.start);
        all
    };
    fill(record, &timings, origin, handshake_at);
    if let Some(connection) = &connection {
        let ssthresh = connection.congestion_state().metrics().ssthresh;
        record["transport"] = common::transport_stats(&connection.stats(), ssthresh);
        connection.close(0u32.into(), b"done");
    }
    if let Some(endpoint) = endpoint {
        // the closing handshake ends the qlog stream (written when the connection is dropped)
        drop(connection);
        let _ = tokio::time::timeout(CLOSE_WAIT, endpoint.wait_idle()).await;
    }
    if let Some(meter) = &settings.device {
        record["device"]["applied"] = meter.summary();
    }
    record["qlog"] = qlog.map_or(Value::Null, |path| json!([path.display().to_string()]));
    let failed = timings.iter().find(|t| t.status.is_some_and(|s| s != 200));
    if record["ok"] == json!(true) {
        if let Some(failed) = failed {
            record["ok"] = json!(false);
            record["error"] = json!(format!("HTTP status {} for {}", failed.status.unwrap_or(0), failed.path));
        } else if record["objects_completed"].as_u64() != Some(settings.paths.len() as u64) {
            record["ok"] = json!(false);
            record["error"] = json!("not every object completed");
        } else if settings.resumption != Mode::None && store.offered() == 0 {
            record["ok"] = json!(false);
            record["error"] = json!("no session ticket to resume with: the priming connection received none");
        }
    }
}

/// Say `--ready-file`, then wait for `--start-file` (bounded by the timeout), as
/// quicbed.apps.record.StartBarrier does for the Python clients.
async fn pass_barrier(settings: &Settings) -> Result<(), Error> {
    if let Some(ready) = &settings.ready_file {
        std::fs::write(ready, b"")?;
    }
    let Some(start) = &settings.start_file else { return Ok(()) };
    let deadline = Instant::now() + settings.timeout;
    while !start.exists() {
        if Instant::now() > deadline {
            return Err(format!("{} did not appear within {} s", start.display(), settings.timeout.as_secs_f64()).into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(())
}

/// The priming connection: one request for an object the server does not have, then a wait
/// for the session tickets; its times (from its own start), never the run's.
async fn prime(settings: &Settings, endpoint: &Endpoint, tls: Arc<QuicClientConfig>, store: &CountingStore,
               tokens: Arc<CountingTokens>) -> Value {
    let start = Instant::now();
    let mut handshake = None;
    let outcome: Result<u16, Error> = async {
        let mut config = ClientConfig::new(tls);
        config.transport_config(Arc::new(settings.knobs.transport_config(Duration::from_secs(60))?)).token_store(tokens.clone());
        let connection = endpoint.connect_with(config, settings.address, &settings.server_name)?.await?;
        handshake = Some(Instant::now());
        let (mut driver, mut sender) = h3::client::new(h3_quinn::Connection::new(connection.clone())).await?;
        let drive = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
        let request = http::Request::get(format!("https://{}{PRIMING_PATH}", settings.authority))
            .header("user-agent", USER_AGENT)
            .body(())?;
        let mut stream = sender.send_request(request).await?;
        stream.finish().await?;
        let status = stream.recv_response().await?.status().as_u16();
        while let Some(mut chunk) = stream.recv_data().await? {
            chunk.advance(chunk.remaining());
        }
        let waited = Instant::now();
        while (store.received() == 0 || tokens.received() == 0) && waited.elapsed() < TICKET_WAIT {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(sender);
        drive.abort();
        connection.close(0u32.into(), b"primed");
        // drained (three PTOs): none of its packets reach the run's captures, which start once
        // the client passes the barrier, on the same addresses and ports as the measured one
        endpoint.wait_idle().await;
        Ok(status)
    }
    .await;
    let offset = |at: Option<Instant>| at.map_or(Value::Null, |t| json!((t - start).as_secs_f64()));
    json!({
        "handshake_time": offset(handshake), "total_time": offset(Some(Instant::now())),
        "status": outcome.as_ref().ok(), "error": outcome.as_ref().err().map(|e| e.to_string()),
    })
}

fn local_address(settings: &Settings) -> Result<SocketAddr, Error> {
    let ip = match &settings.bind {
        Some(bind) => bind.parse().map_err(|_| format!("--bind: {bind:?} is not an IP address"))?,
        None if settings.address.is_ipv6() => "::".parse()?,
        None => "0.0.0.0".parse()?,
    };
    Ok(SocketAddr::new(ip, 0))
}

async fn download(settings: &Settings, connection: quinn::Connection, objects: Arc<Mutex<Vec<ObjectTiming>>>) -> Result<(), Error> {
    let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(connection)).await?;
    let drive = tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    let queue = Arc::new(Mutex::new(settings.paths.iter().cloned().collect::<VecDeque<_>>()));
    let mut workers = Vec::new();
    for _ in 0..settings.parallel.min(settings.paths.len()) {
        let (queue, objects, mut sender) = (queue.clone(), objects.clone(), sender.clone());
        let authority = settings.authority.clone();
        workers.push(tokio::spawn(async move {
            loop {
                let Some(path) = queue.lock().unwrap().pop_front() else { return Ok::<(), Error>(()) };
                let index = {
                    let mut all = objects.lock().unwrap();
                    all.push(ObjectTiming { path: path.clone(), start: Instant::now(), status: None,
                                            first_byte: None, end: None, size: 0 });
                    all.len() - 1
                };
                let request = http::Request::get(format!("https://{authority}{path}"))
                    .header("user-agent", USER_AGENT)
                    .body(())?;
                let mut stream = sender.send_request(request).await?;
                stream.finish().await?;
                let response = stream.recv_response().await?;
                {
                    let mut all = objects.lock().unwrap();
                    all[index].first_byte = Some(Instant::now());
                    all[index].status = Some(response.status().as_u16());
                }
                while let Some(mut chunk) = stream.recv_data().await? {
                    let size = chunk.remaining() as u64;
                    chunk.advance(chunk.remaining());
                    objects.lock().unwrap()[index].size += size;
                }
                objects.lock().unwrap()[index].end = Some(Instant::now());
            }
        }));
    }
    drop(sender);
    for worker in workers {
        worker.await??;
    }
    drive.abort();
    Ok(())
}

fn fill(record: &mut Value, timings: &[ObjectTiming], origin: Instant, handshake_at: Option<Instant>) {
    let offset = |at: Option<Instant>| at.map_or(Value::Null, |t| json!((t - origin).as_secs_f64()));
    record["objects"] = timings.iter().map(|t| json!({
        "path": t.path, "status": t.status, "start": offset(Some(t.start)),
        "first_byte": offset(t.first_byte), "end": offset(t.end), "size": t.size,
    })).collect();
    let finished: Vec<&ObjectTiming> = timings.iter().filter(|t| t.end.is_some()).collect();
    record["objects_completed"] = json!(finished.len());
    record["bytes"] = json!(timings.iter().map(|t| t.size).sum::<u64>());
    record["handshake_time"] = offset(handshake_at);
    let Some(first_request) = timings.iter().map(|t| t.start).min() else { return };
    if let Some(first_byte) = timings.iter().filter_map(|t| t.first_byte).min() {
        record["ttfb"] = json!((first_byte - first_request).as_secs_f64());
    }
    if finished.len() == timings.len() && !finished.is_empty() {
        let last = finished.iter().filter_map(|t| t.end).max().unwrap_or(first_request);
        record["completion_time"] = json!((last - first_request).as_secs_f64());
        record["total_time"] = json!((last - origin).as_secs_f64());
    }
}

fn tls_config(settings: &Settings, store: Arc<CountingStore>) -> Result<rustls::ClientConfig, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let verifier: Arc<dyn ServerCertVerifier> = if settings.insecure {
        Arc::new(TrustedCertificates { pinned: None, provider })
    } else {
        let path = settings.ca_cert.as_ref().ok_or("give --ca-cert (quicbed's certificate) or --insecure")?;
        let pinned = CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Arc::new(TrustedCertificates { pinned: Some(pinned.into_iter().map(|c| c.into_owned()).collect()), provider })
    };
    let mut tls = builder.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.resumption = rustls::client::Resumption::store(store);
    tls.enable_early_data = settings.resumption == Mode::ZeroRtt;
    if let Some(path) = &settings.keylog {
        tls.key_log = Arc::new(FileKeyLog::open(path)?);
    }
    Ok(tls)
}

/// The TLS secrets in NSS key log format (what Wireshark's tls.keylog_file reads), appended to
/// one file as rustls hands them over; rustls' own KeyLogFile only follows SSLKEYLOGFILE.
#[derive(Debug)]
struct FileKeyLog(Mutex<std::fs::File>);

impl FileKeyLog {
    fn open(path: &Path) -> Result<Self, Error> {
        let file = std::fs::OpenOptions::new().create(true).append(true).open(path)
            .map_err(|e| format!("--keylog {}: {e}", path.display()))?;
        Ok(Self(Mutex::new(file)))
    }
}

impl rustls::KeyLog for FileKeyLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        use std::io::Write;
        let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
        if let Ok(mut file) = self.0.lock() {
            let _ = writeln!(file, "{label} {} {}", hex(client_random), hex(secret));
        }
    }
}

/// quicbed's server certificate is self-signed: the client trusts exactly the certificates
/// of `--ca-cert` (the server must present one of them), or any with `--insecure`; the
/// handshake signatures are checked either way.
#[derive(Debug)]
struct TrustedCertificates {
    pinned: Option<Vec<CertificateDer<'static>>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for TrustedCertificates {
    fn verify_server_cert(&self, end_entity: &CertificateDer<'_>, _: &[CertificateDer<'_>], _: &ServerName<'_>,
                          _: &[u8], _: UnixTime) -> Result<ServerCertVerified, rustls::Error> {
        match &self.pinned {
            Some(pinned) if !pinned.iter().any(|c| c.as_ref() == end_entity.as_ref()) => {
                Err(rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer))
            }
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &rustls::DigitallySignedStruct)
                              -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &rustls::DigitallySignedStruct)
                              -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

