//! The wall clock, injected: the audit log stamps records and the approval
//! seal checks expiry through it, so tests move time instead of sleeping.
//! It may only tell the time; nothing here decides.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where the time comes from.
pub trait Clock: Send + Sync {
    fn now(&self) -> SystemTime;

    /// Milliseconds since the epoch (0 before it, saturating far after it).
    fn now_millis(&self) -> u64 {
        self.now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// The operating system's clock: what every running service uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that moves only when told to, for tests of expiry and stamps.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<SystemTime>,
}

impl ManualClock {
    pub fn new(start: SystemTime) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self
            .now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self
            .now
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_millis(1_500));
        assert_eq!(clock.now_millis(), 1_500);
        assert_eq!(clock.now_millis(), 1_500);
        clock.advance(Duration::from_millis(250));
        assert_eq!(clock.now_millis(), 1_750);
    }

    #[test]
    fn a_time_before_the_epoch_reads_as_zero() {
        let clock = ManualClock::new(UNIX_EPOCH - Duration::from_secs(5));
        assert_eq!(clock.now_millis(), 0);
    }
}
