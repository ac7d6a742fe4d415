//! What a running portcullis counts, for a monitoring system to scrape
//! (`serve --metrics ADDR`, `GET /metrics`, OpenMetrics text): decisions
//! by outcome, cause and tool, how long deciding took, approvals, the
//! audit log's batches and their durable writes, downstream calls and
//! their failures, and the calls in flight.
//!
//! One registry per process, reached from where each thing happens (the
//! keeper, the log's writer, a downstream connection), as a metrics
//! library's global recorder is: counting must never be a reason to pass
//! one more handle through every layer. It only counts; nothing reads it
//! to decide.

use std::sync::LazyLock;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The content type of [`encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    outcome: &'static str,
    cause: &'static str,
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    event: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    decision_seconds: Histogram,
    approvals: Family<EventLabels, Counter>,
    audit_batch_records: Histogram,
    audit_write_seconds: Histogram,
    downstream_calls: Family<ServerLabels, Counter>,
    downstream_errors: Family<ServerLabels, Counter>,
    in_flight: Gauge,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("portcullis");
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "decisions",
            "Decisions made, by outcome, cause and tool",
            decisions.clone(),
        );
        // 10 µs to about 5 s.
        let decision_seconds = Histogram::new(exponential_buckets(1e-5, 2.0, 20));
        registry.register(
            "decision_duration_seconds",
            "Time to decide one request (facts and Cedar), in seconds",
            decision_seconds.clone(),
        );
        let approvals = Family::<EventLabels, Counter>::default();
        registry.register(
            "approvals",
            "Approval events: asked, answered, state_refused, ...",
            approvals.clone(),
        );
        let audit_batch_records = Histogram::new(exponential_buckets(1.0, 2.0, 13));
        registry.register(
            "audit_batch_records",
            "Records in one audit batch",
            audit_batch_records.clone(),
        );
        let audit_write_seconds = Histogram::new(exponential_buckets(1e-5, 2.0, 20));
        registry.register(
            "audit_write_duration_seconds",
            "Time to make one audit batch durable (fsync, or the database's commit), in seconds",
            audit_write_seconds.clone(),
        );
        let downstream_calls = Family::<ServerLabels, Counter>::default();
        registry.register(
            "downstream_calls",
            "Calls forwarded to a downstream server",
            downstream_calls.clone(),
        );
        let downstream_errors = Family::<ServerLabels, Counter>::default();
        registry.register(
            "downstream_errors",
            "Forwarded calls a downstream server failed or never answered",
            downstream_errors.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "calls_in_flight",
            "Tool calls running now",
            in_flight.clone(),
        );
        Self {
            registry,
            decisions,
            decision_seconds,
            approvals,
            audit_batch_records,
            audit_write_seconds,
            downstream_calls,
            downstream_errors,
            in_flight,
        }
    }
}

/// A decision, and how long it took to make (`None` for a refusal made
/// before Cedar was asked). `tool` must be a tool the registry knows, or
/// `unknown`: a client's made-up names would grow the series without end.
pub fn decided(outcome: &'static str, cause: &'static str, tool: &str, took: Option<Duration>) {
    METRICS
        .decisions
        .get_or_create(&DecisionLabels {
            outcome,
            cause,
            tool: tool.to_owned(),
        })
        .inc();
    if let Some(took) = took {
        METRICS.decision_seconds.observe(took.as_secs_f64());
    }
}

/// An approval event, as recorded.
pub fn approval(event: &str) {
    METRICS
        .approvals
        .get_or_create(&EventLabels {
            event: event.to_owned(),
        })
        .inc();
}

/// An audit batch made durable.
pub fn audit_batch(records: usize, took: Duration) {
    METRICS.audit_batch_records.observe(records as f64);
    METRICS.audit_write_seconds.observe(took.as_secs_f64());
}

/// A call forwarded to `server`, and whether it failed.
pub fn downstream_call(server: &str, failed: bool) {
    let labels = ServerLabels {
        server: server.to_owned(),
    };
    METRICS.downstream_calls.get_or_create(&labels).inc();
    if failed {
        METRICS.downstream_errors.get_or_create(&labels).inc();
    }
}

/// A call running from now until the guard is dropped.
pub fn call_started() -> InFlight {
    METRICS.in_flight.inc();
    InFlight
}

/// Counts one call in flight while it lives.
pub struct InFlight;

impl Drop for InFlight {
    fn drop(&mut self) {
        METRICS.in_flight.dec();
    }
}

/// Everything counted so far, as OpenMetrics text.
pub fn encode() -> String {
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, &METRICS.registry);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_counted_is_in_the_text_with_its_labels() {
        decided(
            "deny",
            "hard_constraint",
            "builtin/write_file",
            Some(Duration::from_micros(30)),
        );
        approval("asked");
        audit_batch(3, Duration::from_millis(2));
        downstream_call("files", true);
        let guard = call_started();
        let text = encode();
        assert!(
            text.contains(r#"portcullis_decisions_total{outcome="deny",cause="hard_constraint",tool="builtin/write_file"}"#),
            "{text}"
        );
        assert!(
            text.contains(r#"portcullis_approvals_total{event="asked"}"#),
            "{text}"
        );
        assert!(
            text.contains("portcullis_decision_duration_seconds_bucket"),
            "{text}"
        );
        assert!(
            text.contains("portcullis_audit_batch_records_count"),
            "{text}"
        );
        assert!(
            text.contains(r#"portcullis_downstream_errors_total{server="files"}"#),
            "{text}"
        );
        assert!(text.contains("portcullis_calls_in_flight"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        drop(guard);
    }
}
