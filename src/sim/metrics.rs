//! Per-replica Prometheus metrics under vLLM's names, encoded with `prometheus-client`.
//!
//! Counters and gauges carry a `model_name` label like vLLM's; `process_start_time_seconds`
//! has none. A `restart` fault replaces the whole set: counters start again from zero and
//! the start time changes, which is how a recorder sees a real server restart.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// One replica's metrics (one "process lifetime").
#[derive(Debug)]
pub struct ReplicaMetrics {
    registry: Registry,
    pub num_drafts: Counter,
    pub num_draft_tokens: Counter,
    pub num_accepted_tokens: Counter,
    /// Accepted draft tokens per 0-based draft position (`position` label), as vLLM's
    /// `spec_decode_num_accepted_tokens_per_pos`: a step that accepted `a` drafts counts one
    /// at each of positions `0..a`.
    pub accepted_per_position: Family<Vec<(String, String)>, Counter>,
    pub running: Gauge,
    pub waiting: Gauge,
    pub prompt_tokens: Counter,
    pub generation_tokens: Counter,
    pub request_success: Counter,
    pub prefix_cache_queries: Counter,
    pub prefix_cache_hits: Counter,
    /// The KV pool's used share, 0–1 (`vllm:kv_cache_usage_perc`).
    pub kv_cache_usage: Gauge<f64, AtomicU64>,
    pub num_preemptions: Counter,
    pub start_time: Gauge<f64, AtomicU64>,
}

impl ReplicaMetrics {
    /// A fresh set whose `process_start_time_seconds` is now (UTC seconds), at least
    /// `min_start` so that a restart within the same second still changes it.
    pub fn new(model: &str, min_start: f64) -> Arc<Self> {
        let mut registry = Registry::default();
        let start_time = Gauge::<f64, AtomicU64>::default();
        let now = time::OffsetDateTime::now_utc().unix_timestamp_nanos() as f64 / 1e9;
        start_time.set(now.max(min_start));
        registry.register(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            start_time.clone(),
        );
        let m = ReplicaMetrics {
            registry,
            num_drafts: Counter::default(),
            num_draft_tokens: Counter::default(),
            num_accepted_tokens: Counter::default(),
            accepted_per_position: Family::default(),
            running: Gauge::default(),
            waiting: Gauge::default(),
            prompt_tokens: Counter::default(),
            generation_tokens: Counter::default(),
            request_success: Counter::default(),
            prefix_cache_queries: Counter::default(),
            prefix_cache_hits: Counter::default(),
            kv_cache_usage: Gauge::default(),
            num_preemptions: Counter::default(),
            start_time,
        };
        let mut m = m;
        let sub = m
            .registry
            .sub_registry_with_label(("model_name".into(), model.to_string().into()));
        sub.register(
            "vllm:spec_decode_num_drafts",
            "Number of spec decoding drafts",
            m.num_drafts.clone(),
        );
        sub.register(
            "vllm:spec_decode_num_draft_tokens",
            "Number of draft tokens",
            m.num_draft_tokens.clone(),
        );
        sub.register(
            "vllm:spec_decode_num_accepted_tokens",
            "Number of accepted tokens",
            m.num_accepted_tokens.clone(),
        );
        sub.register(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position",
            m.accepted_per_position.clone(),
        );
        sub.register(
            "vllm:num_requests_running",
            "Number of requests in model execution batches",
            m.running.clone(),
        );
        sub.register(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed",
            m.waiting.clone(),
        );
        sub.register(
            "vllm:prompt_tokens",
            "Number of prefill tokens processed",
            m.prompt_tokens.clone(),
        );
        sub.register(
            "vllm:generation_tokens",
            "Number of generation tokens processed",
            m.generation_tokens.clone(),
        );
        sub.register(
            "vllm:request_success",
            "Count of successfully processed requests",
            m.request_success.clone(),
        );
        sub.register(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens",
            m.prefix_cache_queries.clone(),
        );
        sub.register(
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens",
            m.prefix_cache_hits.clone(),
        );
        sub.register(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            m.kv_cache_usage.clone(),
        );
        sub.register(
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            m.num_preemptions.clone(),
        );
        Arc::new(m)
    }

    /// Count one speculative step that accepted `accepted` drafts: one at each position
    /// below it.
    pub fn count_accepted_positions(&self, accepted: u32) {
        for position in 0..accepted {
            self.accepted_per_position
                .get_or_create(&vec![("position".to_owned(), position.to_string())])
                .inc();
        }
    }

    /// The start time this set reports.
    pub fn start_time_seconds(&self) -> f64 {
        self.start_time.get()
    }

    /// Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        if encode(&mut s, &self.registry).is_err() {
            s.clear();
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_vllm_names_with_model_label() {
        let m = ReplicaMetrics::new("m1", 0.0);
        m.num_drafts.inc_by(3);
        m.running.set(2);
        let t = m.encode();
        assert!(
            t.contains("vllm:spec_decode_num_drafts_total{model_name=\"m1\"} 3"),
            "{t}"
        );
        assert!(
            t.contains("vllm:num_requests_running{model_name=\"m1\"} 2"),
            "{t}"
        );
        assert!(t.contains("process_start_time_seconds "), "{t}");
        m.count_accepted_positions(2);
        m.count_accepted_positions(1);
        let t = m.encode();
        for line in [
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m1\",position=\"0\"} 2",
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m1\",position=\"1\"} 1",
        ] {
            assert!(t.contains(line), "{line} not in {t}");
        }
        let later = ReplicaMetrics::new("m1", m.start_time_seconds() + 1.0);
        assert!(later.start_time_seconds() > m.start_time_seconds());
    }
}
