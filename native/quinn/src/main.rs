//! quicbed's native QUIC endpoints (quinn + h3). Started by `python -m quicbed.apps.quic.native`,
//! which resolves the transport profile and builds the record; see docs/endpoints.md.
//!
//!     quicbed-quinn server --root DIR --cert PEM --key PEM --profile-record JSON [...]
//!     quicbed-quinn client --record-template JSON --address IP [--ca-cert PEM | --insecure] [...]
//!     quicbed-quinn version

mod args;
mod bbr;
mod cc;
mod client;
mod common;
mod device;
mod knobs;
mod resumption;
mod server;
mod timer;

use std::process::ExitCode;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = match argv.first().map(String::as_str) {
        Some("server") => server::main(&argv[1..]).map(|()| true),
        Some("client") => client::main(&argv[1..]),
        Some("version") => {
            println!("{}", common::versions());
            Ok(true)
        }
        _ => {
            eprintln!("usage: quicbed-quinn server|client|version [options] (see docs/endpoints.md)");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}
