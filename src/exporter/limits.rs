//! How much one target's scrape may make, as Prometheus bounds a target
//! (`sample_limit`, `label_limit`, the name and value lengths, the body
//! size), and when it must stop. An agent chooses its MBeans' names and
//! values, so every one of these is a hostile input's lever: a nested
//! composite multiplies its keys into every leaf's name, a long name feeds
//! a backtracking rule. The bounds are checked while the scrape works, so
//! a target over one stops at once, not after the work is done.

use std::fmt;
use std::time::Instant;

/// The bounds of one target's scrape.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Samples one target may give.
    pub sample_limit: usize,
    /// Labels one sample may carry (the target's own label included).
    pub label_limit: usize,
    /// Bytes of a metric or label name.
    pub name_length_limit: usize,
    /// Bytes of a label value.
    pub label_value_length_limit: usize,
    /// Bytes of exposition one target may add to an answer.
    pub body_size_limit: usize,
    /// Bytes of the text a value's rules are matched against; a longer
    /// one is left out (and counted) before any rule looks at it.
    pub match_length_limit: usize,
    /// When the scrape's time is up.
    pub deadline: Option<Instant>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            sample_limit: 100_000,
            label_limit: 64,
            name_length_limit: 512,
            label_value_length_limit: 4096,
            body_size_limit: 32 << 20,
            match_length_limit: 8192,
            deadline: None,
        }
    }
}

/// Why a target's scrape was stopped: the bound, in the configuration's
/// words, and what went over it. Never repeats the agent's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exceeded {
    Samples(usize),
    Labels(usize),
    NameLength(usize),
    LabelValueLength(usize),
    BodySize(usize),
    Deadline,
}

impl Exceeded {
    /// The configuration key of the bound (`prometheus.<key>`), or
    /// `timeout` for the deadline: a short reason for a label.
    pub fn key(&self) -> &'static str {
        match self {
            Exceeded::Samples(_) => "sample_limit",
            Exceeded::Labels(_) => "label_limit",
            Exceeded::NameLength(_) => "name_length_limit",
            Exceeded::LabelValueLength(_) => "label_value_length_limit",
            Exceeded::BodySize(_) => "body_size_limit",
            Exceeded::Deadline => "timeout",
        }
    }
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exceeded::Samples(n) => write!(
                f,
                "more than {n} samples (prometheus.sample_limit); the target's samples were dropped"
            ),
            Exceeded::Labels(n) => write!(
                f,
                "a sample with more than {n} labels (prometheus.label_limit); the target's samples were dropped"
            ),
            Exceeded::NameLength(n) => write!(
                f,
                "a metric or label name longer than {n} bytes (prometheus.name_length_limit); the target's samples were dropped"
            ),
            Exceeded::LabelValueLength(n) => write!(
                f,
                "a label value longer than {n} bytes (prometheus.label_value_length_limit); the target's samples were dropped"
            ),
            Exceeded::BodySize(n) => write!(
                f,
                "more than {n} bytes of metrics (prometheus.body_size_limit); the target's samples were dropped"
            ),
            Exceeded::Deadline => write!(
                f,
                "the scrape timeout passed while its samples were being made"
            ),
        }
    }
}

impl Limits {
    /// `Err(Deadline)` once the deadline has passed.
    pub fn check_time(&self) -> Result<(), Exceeded> {
        match self.deadline {
            Some(d) if Instant::now() >= d => Err(Exceeded::Deadline),
            _ => Ok(()),
        }
    }
}

/// Checks the time only every so many calls: reading the clock for each
/// value would cost more than the value.
#[derive(Debug, Default)]
pub struct Ticker(u32);

impl Ticker {
    pub fn tick(&mut self, limits: &Limits) -> Result<(), Exceeded> {
        self.0 = self.0.wrapping_add(1);
        if self.0.is_multiple_of(256) {
            limits.check_time()
        } else {
            Ok(())
        }
    }
}
