//! The shared tables' shape, made by the first replica that connects and
//! checked by every other. Statements are idempotent and run in one
//! transaction under an advisory lock, so replicas starting together take
//! turns and none sees half a schema.

use super::StateError;

/// Any number: the key of the advisory lock replicas take turns on.
const MIGRATION_LOCK: i64 = 0x706f_7274_6375;

/// The version of the tables this build writes. A database made by a
/// newer build is refused rather than written in a shape it does not know.
pub const SCHEMA_VERSION: i32 = 3;

const TABLES: &str = r"
CREATE TABLE IF NOT EXISTS portcullis_schema (
    version integer NOT NULL
);
CREATE TABLE IF NOT EXISTS portcullis_clients (
    name text PRIMARY KEY,
    tier text NOT NULL,
    token_sha256 text NOT NULL UNIQUE CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
    created text NOT NULL
);
CREATE OR REPLACE FUNCTION portcullis_clients_changed() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('portcullis_clients', '');
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE OR REPLACE TRIGGER portcullis_clients_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON portcullis_clients
    FOR EACH STATEMENT EXECUTE FUNCTION portcullis_clients_changed();
CREATE TABLE IF NOT EXISTS portcullis_approval_nonces (
    nonce text PRIMARY KEY,
    expires_ms bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS portcullis_approval_nonces_expiry
    ON portcullis_approval_nonces (expires_ms);
CREATE TABLE IF NOT EXISTS portcullis_audit (
    chain text NOT NULL,
    seq bigint NOT NULL CHECK (seq > 0),
    hash text NOT NULL,
    line text NOT NULL,
    PRIMARY KEY (chain, seq)
);
-- A record is about 2 KiB, just past the size at which PostgreSQL compresses
-- a value: lz4 costs a fraction of the default's CPU (1.6x the rows per
-- second on two cores). A server built without lz4 keeps its default.
DO $$
BEGIN
    ALTER TABLE portcullis_audit ALTER COLUMN line SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    NULL;
END
$$;
CREATE TABLE IF NOT EXISTS portcullis_sessions (
    id text PRIMARY KEY,
    owner text NOT NULL,
    agent text NOT NULL,
    conversation text,
    title text NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL
);
CREATE INDEX IF NOT EXISTS portcullis_sessions_by_owner ON portcullis_sessions (owner, updated_at);
CREATE TABLE IF NOT EXISTS portcullis_turns (
    session_id text NOT NULL REFERENCES portcullis_sessions (id),
    n bigint NOT NULL,
    prompt text NOT NULL,
    reply text,
    state text NOT NULL,
    started_at text NOT NULL,
    ended_at text,
    runner text,
    PRIMARY KEY (session_id, n)
);
CREATE TABLE IF NOT EXISTS portcullis_runners (
    id text PRIMARY KEY,
    host text NOT NULL,
    pid bigint NOT NULL,
    heartbeat_ms bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS portcullis_approvers (
    name text PRIMARY KEY,
    groups text[] NOT NULL,
    token_sha256 text NOT NULL UNIQUE CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
    created text NOT NULL
);
-- The approvers are read with the clients, on the same notification.
CREATE OR REPLACE TRIGGER portcullis_approvers_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON portcullis_approvers
    FOR EACH STATEMENT EXECUTE FUNCTION portcullis_clients_changed();
CREATE TABLE IF NOT EXISTS portcullis_questions (
    id text PRIMARY KEY,
    replica text NOT NULL,
    asked_ms bigint NOT NULL,
    expires_ms bigint NOT NULL,
    closed_ms bigint,
    status text NOT NULL
        CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'withdrawn')),
    required integer NOT NULL CHECK (required > 0),
    view text NOT NULL,
    call text NOT NULL
);
CREATE INDEX IF NOT EXISTS portcullis_questions_by_status
    ON portcullis_questions (status, asked_ms);
CREATE TABLE IF NOT EXISTS portcullis_answers (
    question_id text NOT NULL REFERENCES portcullis_questions (id) ON DELETE CASCADE,
    n integer NOT NULL,
    approver text NOT NULL,
    fingerprint text NOT NULL,
    verdict text NOT NULL CHECK (verdict IN ('approve', 'deny')),
    reason text NOT NULL,
    at text NOT NULL,
    PRIMARY KEY (question_id, n),
    UNIQUE (question_id, approver)
);
CREATE TABLE IF NOT EXISTS portcullis_page_sessions (
    id_sha256 text PRIMARY KEY CHECK (id_sha256 ~ '^[0-9a-f]{64}$'),
    approver text NOT NULL,
    fingerprint text NOT NULL,
    groups text[] NOT NULL,
    csrf text NOT NULL,
    opened_ms bigint NOT NULL
);
CREATE TABLE IF NOT EXISTS portcullis_policy_snapshots (
    hash text PRIMARY KEY,
    snapshot text NOT NULL
);
-- A row is a claim, not a proof: each replica checks its signature.
CREATE TABLE IF NOT EXISTS portcullis_policy_applies (
    policy_set text NOT NULL,
    record text NOT NULL,
    applied_ms bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS portcullis_policy_applies_set ON portcullis_policy_applies (policy_set);
";

/// Brings the tables to [`SCHEMA_VERSION`].
pub async fn migrate(client: &mut deadpool_postgres::Client) -> Result<(), StateError> {
    let transaction = client.transaction().await?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    transaction.batch_execute(TABLES).await?;
    let found: Option<i32> = transaction
        .query_opt("SELECT max(version) FROM portcullis_schema", &[])
        .await?
        .and_then(|row| row.get(0));
    match found {
        Some(version) if version > SCHEMA_VERSION => {
            return Err(StateError::NewerSchema {
                found: version,
                known: SCHEMA_VERSION,
            });
        }
        Some(version) if version == SCHEMA_VERSION => {}
        _ => {
            transaction
                .execute("DELETE FROM portcullis_schema", &[])
                .await?;
            transaction
                .execute(
                    "INSERT INTO portcullis_schema (version) VALUES ($1)",
                    &[&SCHEMA_VERSION],
                )
                .await?;
        }
    }
    transaction.commit().await?;
    Ok(())
}
