//! What a run reads beside its requests, off the hot path: the servers' `/metrics`
//! ([`super::scrape`]) and the GPUs' telemetry ([`super::telemetry::sampler`]), each once
//! before the first request, periodically while requests run, and once after the last.
//!
//! Of a run's shards only shard 0 reads them: one client's scrapes, in its own time order,
//! make the counter series (several hosts' interleaved scrapes would not be in order, and a
//! counter that seems to fall counts as a restart); the GPUs are the arm's whichever client
//! drives them.

use std::sync::mpsc::Sender;

use hyper::header::HeaderValue;

use super::config::RunConfig;
use super::recorder::Msg;
use super::scrape::{During, MetricsScraper};
use super::telemetry::sampler::Sampler;
use crate::artifact::ScrapePhase;
use crate::clock::Origin;
use crate::notice::Notices;

/// The scraper and the telemetry sampler of one run (either may be absent).
pub struct Sidecars {
    scraper: Option<MetricsScraper>,
    gpus: Option<Sampler>,
}

/// Their periodic rounds, until [`Sidecars::after`].
pub struct Running(Vec<During>);

impl Sidecars {
    pub fn new(
        cfg: &RunConfig,
        auth: Option<HeaderValue>,
        msgs: &Sender<Msg>,
        origin: Origin,
        notices: &Notices,
    ) -> Self {
        let first = cfg.shard.as_ref().is_none_or(|p| p.spec.index == 0);
        let t = &cfg.telemetry;
        Self {
            scraper: first.then(|| {
                MetricsScraper::new(&cfg.metrics, auth, msgs.clone(), origin, notices.clone())
            }),
            gpus: (first && !t.sources.is_empty()).then(|| {
                let key = |k: &str| cfg.arm.config.get(k).or_else(|| cfg.arm.defaults.get(k));
                let arm_gpus = crate::artifact::gpus::gpus(key).map(|g| g.count);
                Sampler::new(t, arm_gpus, msgs.clone(), origin, notices.clone())
            }),
        }
    }

    /// The `before` round (the servers and GPUs idle), then the periodic ones.
    pub async fn before(&self) -> Running {
        if let Some(s) = &self.scraper {
            s.round(ScrapePhase::Before).await;
        }
        if let Some(g) = &self.gpus {
            g.round(ScrapePhase::Before).await;
        }
        let scrapes = self.scraper.as_ref().map(MetricsScraper::every_second);
        Running(
            scrapes
                .into_iter()
                .chain(self.gpus.as_ref().map(Sampler::during))
                .collect(),
        )
    }

    /// Stop the periodic rounds, then the `after` round (and the telemetry's summary).
    pub async fn after(&self, running: Running) {
        for during in running.0 {
            during.stop().await;
        }
        if let Some(s) = &self.scraper {
            s.round(ScrapePhase::After).await;
        }
        if let Some(g) = &self.gpus {
            g.finish().await;
        }
    }
}
