//! Keeping the daemon healthy under load and abuse: the size limits of one request, and the
//! metrics (Prometheus text), and the bounded HTTP endpoint they — and the webhooks that start
//! jobs — are served on.

pub mod http;
pub mod limits;
pub mod metrics;
