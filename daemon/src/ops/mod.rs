//! Keeping the daemon healthy under load and abuse: the size limits of one request, and the
//! metrics (Prometheus text), the webhooks that start jobs, and the bounded HTTP endpoint both
//! are served on.

pub mod http;
pub mod limits;
pub mod metrics;
pub mod triggers;
