//! SIGINT and SIGTERM for `serve`: the first ends the session cleanly (calls
//! in progress are cancelled and recorded, the shutdown record is written);
//! a second exits at once. Hosts close stdio servers with SIGINT (Claude
//! Code) or SIGTERM, so both are an ordinary end, not an error.

use std::io;

use tokio::signal::unix::{Signal, SignalKind, signal};

/// The exit status after a second signal: 128 + SIGINT, as shells report it.
const FORCED_EXIT: i32 = 130;

/// The two signals, listened for from start-up on, so that one arriving
/// early is not lost to its default action.
pub struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

impl Signals {
    pub fn install() -> io::Result<Self> {
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    /// Waits for the first signal and names it; from then on, a second one
    /// exits the process at once.
    pub async fn first(mut self) -> &'static str {
        let name = self.next().await;
        tokio::spawn(async move {
            let again = self.next().await;
            eprintln!("portcullis: {again} again; exiting now");
            std::process::exit(FORCED_EXIT);
        });
        name
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
        }
    }
}
