//! Keeping the daemon healthy under load and abuse: the size limits of one request, and the
//! metrics (Prometheus text, with a bounded HTTP endpoint).

pub mod limits;
pub mod metrics;
