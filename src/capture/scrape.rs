//! Prometheus scrapes of each replica: fetch `/metrics`, parse the text exposition format
//! (Prometheus 0.0.4 and OpenMetrics 1.0, which vLLM, SGLang, llama.cpp and `anvil-sim`
//! serve) into samples, and turn them into `scrapes` rows.
//!
//! Every sample line is kept as exposed (`name{labels} value [timestamp]`), histogram
//! `_bucket`/`_sum`/`_count` and `_total` suffixes included, each with its family's `# TYPE`
//! (so restart detection knows which series are counters); the text is read by
//! [`super::exposition`], and a line that breaks the format is skipped, never guessed at,
//! and reported once per replica as a warning naming the line.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

use hyper::header::HeaderValue;

use super::endpoint::MetricsTarget;
use super::hotpath::Cancel;
use super::http::{self, GetError, SIDE_TIMEOUT};
use super::recorder::Msg;
use crate::artifact::schema::canonical_labels;
use crate::artifact::{ScrapePhase, ScrapeRow};
use crate::clock::Origin;
use crate::notice::Notices;

/// One parsed sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub metric: String,
    /// Canonical label text (keys sorted).
    pub labels: String,
    /// The family's `# TYPE`, empty when the exposition gave none.
    pub metric_type: String,
    pub value: f64,
}

/// One replica's scrape: its samples, and the lines of its text that broke the format.
pub struct Scraped {
    pub samples: Vec<Sample>,
    pub bad_lines: usize,
    /// The first bad line's number and why.
    pub first_error: Option<(usize, String)>,
}

/// Parse exposition text ([`super::exposition`]): the samples with canonical label text,
/// how many lines broke the grammar, and the first of them (line number, why).
pub fn parse(body: &[u8]) -> Scraped {
    let exposition = super::exposition::read_bytes(body);
    let samples = exposition
        .samples
        .into_iter()
        .map(|s| Sample {
            labels: canonical_labels(s.labels.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
            metric: s.name,
            metric_type: s.metric_type,
            value: s.value,
        })
        .collect();
    Scraped {
        samples,
        bad_lines: exposition.bad_lines,
        first_error: exposition.first_error,
    }
}

/// Why a scrape gave nothing.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error("{url}: HTTP {status} (no metrics there)")]
    Status { url: String, status: u16 },
    #[error(transparent)]
    Get(#[from] GetError),
}

/// Scrape one replica once.
pub async fn scrape(
    target: &MetricsTarget,
    auth: Option<&HeaderValue>,
    timeout: Duration,
) -> Result<Scraped, ScrapeError> {
    let (status, body) = http::get(&target.server, &target.path, auth, timeout).await?;
    if !(200..300).contains(&status) {
        return Err(ScrapeError::Status {
            url: target.url.clone(),
            status,
        });
    }
    Ok(parse(&body))
}

/// Samples as `scrapes` rows.
pub fn rows(replica: u32, t_ns: i64, phase: ScrapePhase, samples: Vec<Sample>) -> Vec<ScrapeRow> {
    samples
        .into_iter()
        .map(|s| ScrapeRow {
            replica,
            t_ns,
            phase,
            metric: s.metric,
            labels: s.labels,
            metric_type: s.metric_type,
            value: s.value,
        })
        .collect()
}

/// The scrapes of one run: every replica once per round, a replica whose metrics are
/// missing in the `before` round warned about and not scraped again, a later failure warned
/// about; the rows go to the writer thread.
#[derive(Clone)]
pub struct MetricsScraper {
    targets: Arc<[MetricsTarget]>,
    auth: Option<HeaderValue>,
    enabled: Arc<[AtomicBool]>,
    /// A replica whose text broke the format has been warned about.
    warned: Arc<[AtomicBool]>,
    msgs: Sender<Msg>,
    origin: Origin,
    notices: Notices,
}

/// A task repeating a round (the `during` scrapes and telemetry readings) until
/// [`During::stop`].
pub struct During {
    stop: Cancel,
    task: tokio::task::JoinHandle<()>,
}

impl During {
    /// Run `round` every `period`, from one `period` on.
    pub fn every<F, Fut>(period: Duration, round: F) -> During
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        let stop = Cancel::new();
        let until = stop.clone();
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tokio::select! {
                    () = until.cancelled() => break,
                    _ = tick.tick() => {}
                }
                round().await;
            }
        });
        During { stop, task }
    }

    /// Stop and wait for the round in progress.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

impl MetricsScraper {
    pub fn new(
        targets: &[MetricsTarget],
        auth: Option<HeaderValue>,
        msgs: Sender<Msg>,
        origin: Origin,
        notices: Notices,
    ) -> Self {
        Self {
            targets: targets.into(),
            auth,
            enabled: targets.iter().map(|_| AtomicBool::new(true)).collect(),
            warned: targets.iter().map(|_| AtomicBool::new(false)).collect(),
            msgs,
            origin,
            notices,
        }
    }

    /// Scrape every enabled replica once.
    pub async fn round(&self, phase: ScrapePhase) {
        for (i, target) in self.targets.iter().enumerate() {
            if !self.enabled[i].load(Ordering::Relaxed) {
                continue;
            }
            match scrape(target, self.auth.as_ref(), SIDE_TIMEOUT).await {
                Ok(scraped) => {
                    let t = self.origin.elapsed_ns();
                    if let Some((line, why)) = &scraped.first_error
                        && !self.warned[i].swap(true, Ordering::Relaxed)
                    {
                        self.notices.say(&format!(
                            "anvil-capture: warning: replica {}: {} line(s) of {} break the \
                             exposition format and were not recorded (first: line {line}: {why})",
                            target.server.replica, scraped.bad_lines, target.url
                        ));
                    }
                    let samples = scraped.samples;
                    let _ = self.msgs.send(Msg::Scrapes(rows(
                        target.server.replica,
                        t,
                        phase,
                        samples,
                    )));
                }
                Err(e) if phase == ScrapePhase::Before => {
                    self.notices.say(&format!(
                        "anvil-capture: warning: replica {}: no metrics ({e}); its scrapes will be empty",
                        target.server.replica
                    ));
                    self.enabled[i].store(false, Ordering::Relaxed);
                }
                Err(e) => self.notices.say(&format!(
                    "anvil-capture: warning: replica {}: scrape failed ({e})",
                    target.server.replica
                )),
            }
        }
    }

    /// A `during` round every second from one second on.
    pub fn every_second(&self) -> During {
        let this = self.clone();
        During::every(Duration::from_secs(1), move || {
            let this = this.clone();
            async move { this.round(ScrapePhase::During).await }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prometheus_and_openmetrics_text() {
        let text = r#"# HELP vllm:num_requests_running Running requests.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="qwen",engine="0"} 3
process_start_time_seconds 1.7644608e9
vllm:e2e_request_latency_seconds_bucket{le="+Inf",model_name="q\"x\\y"} 12 1700000000000
spec_decode_num_accepted_tokens_total 4.5e1
weird{a="1" 2
# EOF
"#;
        let Scraped {
            samples: s,
            bad_lines: bad,
            ..
        } = parse(text.as_bytes());
        assert_eq!(bad, 1);
        assert_eq!(s.len(), 4);
        assert_eq!(s[0].metric, "vllm:num_requests_running");
        assert_eq!(s[0].labels, r#"engine="0",model_name="qwen""#);
        assert_eq!(s[0].value, 3.0);
        assert_eq!(s[1].labels, "");
        assert_eq!(s[1].value, 1.7644608e9);
        assert_eq!(s[2].labels, r#"le="+Inf",model_name="q\"x\\y""#);
        assert_eq!(s[2].value, 12.0);
        assert_eq!(s[3].value, 45.0);
        assert_eq!(s[0].metric_type, "gauge");
        assert_eq!(s[1].metric_type, "");
    }

    /// llama.cpp declares `# TYPE llamacpp:prompt_tokens_total counter`; OpenMetrics
    /// declares the family without the suffix.
    #[test]
    fn samples_carry_their_familys_type() {
        let text = "# TYPE llamacpp:prompt_tokens_total counter\n\
                    llamacpp:prompt_tokens_total 12\n\
                    # TYPE vllm:prompt_tokens counter\n\
                    vllm:prompt_tokens_total{model_name=\"m\"} 7\n\
                    # TYPE vllm:ttft_seconds histogram\n\
                    vllm:ttft_seconds_bucket{le=\"1\"} 3\n\
                    vllm:ttft_seconds_count 3\n";
        let Scraped {
            samples: s,
            bad_lines: bad,
            ..
        } = parse(text.as_bytes());
        assert_eq!(bad, 0);
        let types: Vec<&str> = s.iter().map(|s| s.metric_type.as_str()).collect();
        assert_eq!(types, ["counter", "counter", "histogram", "histogram"]);
    }
}
