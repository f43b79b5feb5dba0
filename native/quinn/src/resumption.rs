//! Session resumption and 0-RTT for the client: which the record asks for, and a session store
//! that says whether a connection offered a ticket (rustls keeps that to itself).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quinn::rustls::client::{ClientSessionMemoryCache, ClientSessionStore, Tls12ClientSessionValue,
                            Tls13ClientSessionValue};
use quinn::rustls::pki_types::ServerName;
use quinn::rustls::NamedGroup;

/// `request.resumption` of the record: a new connection, a resumed one, or a resumed one that
/// sends its requests as 0-RTT data. Both resumed kinds first make a priming connection that
/// receives the server's session tickets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    None,
    Ticket,
    ZeroRtt,
}

impl Mode {
    pub fn parse(text: Option<&str>) -> Result<Self, String> {
        match text.unwrap_or("none") {
            "none" => Ok(Self::None),
            "ticket" => Ok(Self::Ticket),
            "0rtt" => Ok(Self::ZeroRtt),
            other => Err(format!("request.resumption: {other:?} is not none, ticket or 0rtt")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Ticket => "ticket",
            Self::ZeroRtt => "0rtt",
        }
    }
}

/// rustls' in-memory session cache, counting the TLS 1.3 tickets received and offered.
#[derive(Debug)]
pub struct CountingStore {
    inner: ClientSessionMemoryCache,
    received: AtomicU64,
    offered: AtomicU64,
}

impl CountingStore {
    pub fn new() -> Arc<Self> {
        Arc::new(Self { inner: ClientSessionMemoryCache::new(32), received: AtomicU64::new(0),
                        offered: AtomicU64::new(0) })
    }

    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    pub fn offered(&self) -> u64 {
        self.offered.load(Ordering::Relaxed)
    }
}

impl ClientSessionStore for CountingStore {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.inner.set_kx_hint(server_name, group)
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.inner.kx_hint(server_name)
    }

    fn set_tls12_session(&self, server_name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.inner.set_tls12_session(server_name, value)
    }

    fn tls12_session(&self, server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.inner.tls12_session(server_name)
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.inner.remove_tls12_session(server_name)
    }

    fn insert_tls13_ticket(&self, server_name: ServerName<'static>, value: Tls13ClientSessionValue) {
        self.received.fetch_add(1, Ordering::Relaxed);
        self.inner.insert_tls13_ticket(server_name, value)
    }

    fn take_tls13_ticket(&self, server_name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        let ticket = self.inner.take_tls13_ticket(server_name);
        if ticket.is_some() {
            self.offered.fetch_add(1, Ordering::Relaxed);
        }
        ticket
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_name_themselves() {
        for mode in [Mode::None, Mode::Ticket, Mode::ZeroRtt] {
            assert_eq!(Mode::parse(Some(mode.name())), Ok(mode));
        }
        assert_eq!(Mode::parse(None), Ok(Mode::None));
        assert!(Mode::parse(Some("1rtt")).is_err());
    }
}

/// quinn's in-memory store of address-validation tokens (NEW_TOKEN frames), counting the
/// tokens received and offered. A resumed connection offers the priming connection's token in
/// its Initial, so the server may send more than three times what it received before the
/// handshake ends (RFC 9000 section 8.1.3): its 0.5-RTT answer to 0-RTT requests is not cut
/// short by the anti-amplification limit.
pub struct CountingTokens {
    inner: quinn_proto::TokenMemoryCache,
    received: AtomicU64,
    offered: AtomicU64,
}

impl CountingTokens {
    pub fn new() -> Arc<Self> {
        Arc::new(Self { inner: quinn_proto::TokenMemoryCache::default(), received: AtomicU64::new(0),
                        offered: AtomicU64::new(0) })
    }

    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    pub fn offered(&self) -> u64 {
        self.offered.load(Ordering::Relaxed)
    }
}

impl quinn_proto::TokenStore for CountingTokens {
    fn insert(&self, server_name: &str, token: bytes::Bytes) {
        self.received.fetch_add(1, Ordering::Relaxed);
        self.inner.insert(server_name, token)
    }

    fn take(&self, server_name: &str) -> Option<bytes::Bytes> {
        let token = self.inner.take(server_name);
        if token.is_some() {
            self.offered.fetch_add(1, Ordering::Relaxed);
        }
        token
    }
}

/// The server's log of address-validation tokens used: each is accepted once (quinn's own log
/// needs its "bloom" feature and a crate more; a run's server sees few tokens).
#[derive(Default)]
pub struct SingleUseTokens(std::sync::Mutex<std::collections::HashSet<u128>>);

impl quinn_proto::TokenLog for SingleUseTokens {
    fn check_and_insert(&self, nonce: u128, _issued: std::time::SystemTime, _lifetime: std::time::Duration)
        -> Result<(), quinn_proto::TokenReuseError> {
        if self.0.lock().unwrap().insert(nonce) { Ok(()) } else { Err(quinn_proto::TokenReuseError) }
    }
}
