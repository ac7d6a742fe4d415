//! Which protocol era portcullis speaks to a downstream server. A server of
//! the 2025 era is started with `initialize` (the default: most servers a
//! team runs today are of it, and some of them end their session on a
//! request they do not know). A server of the 2026-07-28 revision is
//! reached with `server/discover`, and only then can it say that it runs
//! long calls as tasks (the tasks extension is not part of the 2025 era).

use rmcp::model::ProtocolVersion;
use rmcp::service::ClientLifecycleMode;

/// The era a server's entry asks for (`protocol = "..."`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// `initialize`, as every 2025-era server expects.
    #[default]
    Initialize,
    /// `server/discover` at 2026-07-28, and nothing older.
    Discover,
    /// `server/discover` first, `initialize` when the server answers it
    /// with an error.
    Auto,
}

impl Protocol {
    /// The values an entry may name, for the error that lists them.
    pub const NAMES: &str = "\"2025-11-25\", \"2026-07-28\" or \"auto\"";

    pub fn named(name: &str) -> Option<Self> {
        match name {
            "2025-11-25" => Some(Self::Initialize),
            "2026-07-28" => Some(Self::Discover),
            "auto" => Some(Self::Auto),
            _ => None,
        }
    }

    pub fn lifecycle(self) -> ClientLifecycleMode {
        let modern = vec![ProtocolVersion::V_2026_07_28];
        match self {
            Self::Initialize => ClientLifecycleMode::Initialize,
            Self::Discover => ClientLifecycleMode::Discover {
                preferred_versions: modern,
            },
            Self::Auto => ClientLifecycleMode::Auto {
                preferred_versions: modern,
                legacy_version: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_one_era_and_others_none() {
        assert_eq!(Protocol::named("2025-11-25"), Some(Protocol::Initialize));
        assert_eq!(Protocol::named("2026-07-28"), Some(Protocol::Discover));
        assert_eq!(Protocol::named("auto"), Some(Protocol::Auto));
        assert_eq!(Protocol::named("2026"), None);
        assert_eq!(Protocol::named("AUTO"), None);
        assert!(matches!(
            Protocol::Initialize.lifecycle(),
            ClientLifecycleMode::Initialize
        ));
        assert!(matches!(
            Protocol::Discover.lifecycle(),
            ClientLifecycleMode::Discover { .. }
        ));
    }
}
