//! A fleet's audit chains as the files the offline tools read: each chain
//! written as today's JSON Lines log, with its head (committed at its last
//! record) and every stored policy snapshot beside it. `audit verify`,
//! `replay` and `show` of a `postgres://` source read such an export, and
//! an auditor can take one away (`audit export`).

use std::fs::{self, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::{SharedState, StateError};
use crate::audit::{Head, HeadFile, Mark, StoredRecord, head_path, snapshots_dir};

/// Rows fetched at a time.
const PAGE: i64 = 10_000;

/// What one chain's export holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    pub records: u64,
    pub last: Option<Mark>,
}

impl SharedState {
    /// The chains the database holds, by name.
    pub async fn chains(&self) -> Result<Vec<String>, StateError> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT DISTINCT chain FROM portcullis_audit ORDER BY chain",
                &[],
            )
            .await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    /// Keeps the policy snapshot `hash` (stored in `dir` by the log's
    /// writer side) where every replica and auditor finds it.
    pub async fn keep_snapshot(&self, dir: &Path, hash: &str) -> Result<(), StateError> {
        let path = dir.join(format!("{hash}.json"));
        let text = fs::read_to_string(&path).map_err(|err| StateError::Export {
            path: path.display().to_string(),
            message: err.to_string(),
        })?;
        let client = self.client().await?;
        client
            .execute(
                "INSERT INTO portcullis_policy_snapshots (hash, snapshot) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING",
                &[&hash, &text],
            )
            .await?;
        Ok(())
    }

    /// Writes the chain `chain` to `out` (0600), its head beside it and
    /// the snapshots in `out.policies/`.
    pub async fn export_chain(&self, chain: &str, out: &Path) -> Result<Exported, StateError> {
        let failed = |err: std::io::Error| StateError::Export {
            path: out.display().to_string(),
            message: err.to_string(),
        };
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(out)
            .map_err(failed)?;
        let mut writer = BufWriter::new(file);
        let client = self.client().await?;
        let (mut after, mut records, mut last) = (0i64, 0u64, None);
        loop {
            let rows = client
                .query(
                    "SELECT seq, line FROM portcullis_audit WHERE chain = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                    &[&chain, &after, &PAGE],
                )
                .await?;
            if rows.is_empty() {
                break;
            }
            for row in rows {
                after = row.get(0);
                let line: String = row.get(1);
                writer.write_all(line.as_bytes()).map_err(failed)?;
                writer.write_all(b"\n").map_err(failed)?;
                records += 1;
                // The head names the last record's own hash; a line that does
                // not read leaves the head behind, for verify to find.
                if let Ok(record) = serde_json::from_str::<StoredRecord>(&line) {
                    last = Some(Mark {
                        seq: record.seq,
                        hash: record.hash,
                    });
                }
            }
        }
        writer.flush().map_err(failed)?;
        writer.get_ref().sync_all().map_err(failed)?;
        HeadFile::open(&head_path(out))
            .and_then(|head| {
                head.write(&Head {
                    committed: last.clone(),
                    pending: None,
                })
            })
            .map_err(failed)?;
        let snapshots = snapshots_dir(out);
        fs::create_dir_all(&snapshots).map_err(failed)?;
        for row in client
            .query(
                "SELECT hash, snapshot FROM portcullis_policy_snapshots",
                &[],
            )
            .await?
        {
            let (hash, text): (String, String) = (row.get(0), row.get(1));
            if !hash.chars().all(|c| c.is_ascii_hexdigit()) {
                continue;
            }
            fs::write(snapshots.join(format!("{hash}.json")), text).map_err(failed)?;
        }
        Ok(Exported { records, last })
    }
}
