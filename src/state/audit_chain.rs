//! A replica's audit chain in the shared database: the same canonical
//! records, chained and signed as in a file, one row each in
//! `portcullis_audit` under `(chain, seq)`. A batch is one `INSERT`, so it
//! commits whole or not at all, and the writer acknowledges a record only
//! after PostgreSQL has committed it: the decision row is durable before
//! the effect. Each replica appends to a chain of its own, so no replica
//! waits on another; the primary key refuses a second writer on one chain.

use tokio_postgres::error::SqlState;

use super::StateUrl;
use crate::audit::{
    Batch, ChainError, ChainStore, Check, Failed, GENESIS, Mark, StoredRecord, line_hash_is_valid,
};

/// Rows read at a time when a chain is checked whole.
const PAGE: i64 = 10_000;

/// A replica's chain, written by the log's writer thread.
pub struct SharedChain {
    url: StateUrl,
    chain: String,
    /// The writer's thread has no runtime of its own; this one runs only
    /// while the writer waits on the database.
    runtime: tokio::runtime::Runtime,
    client: Option<tokio_postgres::Client>,
    /// The batch `INSERT`, prepared once per connection: prepared again
    /// for every batch, it cost a round trip and a plan each time.
    insert: Option<tokio_postgres::Statement>,
    tail: Option<Mark>,
    /// A batch whose commit was never answered (the connection broke): it
    /// may have landed, so where the chain ends is read again first.
    unsure: bool,
}

/// A chain's name: a replica's id.
pub fn valid_chain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

impl SharedChain {
    pub fn new(url: &StateUrl, chain: &str) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Self {
            url: url.clone(),
            chain: chain.to_owned(),
            runtime,
            client: None,
            insert: None,
            tail: None,
            unsure: false,
        })
    }

    fn client(&self) -> Result<&tokio_postgres::Client, String> {
        self.client
            .as_ref()
            .ok_or_else(|| "no connection to the shared state".to_owned())
    }

    /// Connects, again if the connection was lost.
    fn connect(&mut self) -> Result<(), String> {
        if self
            .client
            .as_ref()
            .is_none_or(tokio_postgres::Client::is_closed)
        {
            let (client, connection) = self
                .runtime
                .block_on(self.url.connect())
                .map_err(|err| format!("PostgreSQL at {} cannot be reached: {err}", self.url))?;
            self.runtime.spawn(async move {
                if let Err(err) = connection.await {
                    tracing::warn!(error = %err, "the audit chain's connection ended");
                }
            });
            self.client = Some(client);
            self.insert = None;
        }
        Ok(())
    }

    /// The batch `INSERT`, connected and prepared unless both are done.
    fn prepare_insert(&mut self) -> Result<tokio_postgres::Statement, String> {
        self.connect()?;
        if let Some(statement) = &self.insert {
            return Ok(statement.clone());
        }
        let client = self.client()?;
        let statement = self
            .runtime
            .block_on(client.prepare(
                "INSERT INTO portcullis_audit (chain, seq, hash, line) \
                 SELECT $1, * FROM UNNEST($2::bigint[], $3::text[], $4::text[])",
            ))
            .map_err(|err| {
                if err.as_db_error().is_none() {
                    self.client = None;
                }
                err.to_string()
            })?;
        self.insert = Some(statement.clone());
        Ok(statement)
    }

    /// The chain's last row, its hash checked.
    fn read_end(&mut self) -> Result<Option<Mark>, ChainError> {
        let chain = self.chain.clone();
        self.connect().map_err(ChainError::Open)?;
        let client = self.client().map_err(ChainError::Open)?;
        let row = self
            .runtime
            .block_on(client.query_opt(
                "SELECT seq, line FROM portcullis_audit WHERE chain = $1 ORDER BY seq DESC LIMIT 1",
                &[&chain],
            ))
            .map_err(|err| ChainError::Open(err.to_string()))?;
        let Some(row) = row else {
            return Ok(None);
        };
        let line: String = row.get(1);
        let record = checked(&line, None).map_err(ChainError::Broken)?;
        Ok(Some(Mark {
            seq: record.seq,
            hash: record.hash,
        }))
    }

    /// Every row, in order, each checked against the one before.
    fn read_whole(&mut self) -> Result<Option<Mark>, ChainError> {
        let chain = self.chain.clone();
        let mut last: Option<Mark> = None;
        loop {
            let after = last.as_ref().map_or(0, |mark| mark.seq);
            let after = i64::try_from(after).map_err(|err| ChainError::Broken(err.to_string()))?;
            self.connect().map_err(ChainError::Open)?;
            let client = self.client().map_err(ChainError::Open)?;
            let rows = self
                .runtime
                .block_on(client.query(
                    "SELECT line FROM portcullis_audit WHERE chain = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                    &[&chain, &after, &PAGE],
                ))
                .map_err(|err| ChainError::Open(err.to_string()))?;
            if rows.is_empty() {
                return Ok(last);
            }
            for row in rows {
                let line: String = row.get(0);
                let record = checked(&line, Some(last.as_ref())).map_err(ChainError::Broken)?;
                last = Some(Mark {
                    seq: record.seq,
                    hash: record.hash,
                });
            }
        }
    }
}

/// A stored line as a record whose hash is its own and, given the one
/// before (`Some(None)` for the chain's start), that links to it.
fn checked(line: &str, before: Option<Option<&Mark>>) -> Result<StoredRecord, String> {
    let record: StoredRecord =
        serde_json::from_str(line).map_err(|err| format!("a record does not read: {err}"))?;
    if !line_hash_is_valid(line.as_bytes(), &record.hash) {
        return Err(format!(
            "seq {}: the record does not hash to its hash",
            record.seq
        ));
    }
    if let Some(before) = before {
        let (seq, prev) = before.map_or((0, GENESIS), |mark| (mark.seq, mark.hash.as_str()));
        if record.seq != seq + 1 || record.prev != prev {
            return Err(format!(
                "seq {}: the record does not follow seq {seq}",
                record.seq
            ));
        }
    }
    Ok(record)
}

impl ChainStore for SharedChain {
    fn describe(&self) -> String {
        format!("{} (chain {})", self.url, self.chain)
    }

    fn open(&mut self, check: Check) -> Result<(), ChainError> {
        self.tail = match check {
            Check::Whole => self.read_whole()?,
            Check::End => self.read_end()?,
        };
        self.unsure = false;
        Ok(())
    }

    fn begin(&mut self) -> Result<Option<Mark>, String> {
        if self.unsure {
            self.tail = self.read_end().map_err(|err| match err {
                ChainError::Open(message) | ChainError::Broken(message) => message,
            })?;
            self.unsure = false;
        }
        self.connect()?;
        Ok(self.tail.clone())
    }

    fn commit(&mut self, batch: &Batch<'_>, _last: bool) -> Result<(), Failed> {
        let failed = |error: String| Failed {
            error,
            unrestored: None,
        };
        let Some(end) = batch.end().cloned() else {
            return Ok(());
        };
        let text = std::str::from_utf8(batch.lines).map_err(|err| failed(err.to_string()))?;
        let rows: Vec<&str> = text.lines().collect();
        if rows.len() != batch.marks.len() {
            return Err(failed(format!(
                "a batch of {} lines came with {} marks",
                rows.len(),
                batch.marks.len()
            )));
        }
        let seqs = batch
            .marks
            .iter()
            .map(|mark| i64::try_from(mark.seq))
            .collect::<Result<Vec<i64>, _>>()
            .map_err(|err| failed(err.to_string()))?;
        let hashes: Vec<&str> = batch.marks.iter().map(|mark| mark.hash.as_str()).collect();
        let chain = self.chain.clone();
        let insert = self.prepare_insert().map_err(failed)?;
        let client = self.client().map_err(failed)?;
        let inserted = self
            .runtime
            .block_on(client.execute(&insert, &[&chain, &seqs, &hashes, &rows]));
        match inserted {
            Ok(_) => {
                self.tail = Some(end);
                Ok(())
            }
            Err(err) if err.code() == Some(&SqlState::UNIQUE_VIOLATION) => Err(Failed {
                error: format!(
                    "another writer appends to the chain `{}`: give each replica its own --replica-id",
                    self.chain
                ),
                unrestored: Some(format!("the chain `{}` has another writer", self.chain)),
            }),
            Err(err) => {
                // A statement the server refused left nothing; a connection
                // that broke may have left the whole batch.
                if err.as_db_error().is_none() {
                    self.client = None;
                    self.unsure = true;
                }
                Err(failed(err.to_string()))
            }
        }
    }

    fn finish(&mut self) {}
}
