//! Prometheus scrapes of each replica: fetch `/metrics`, parse the text exposition format
//! (Prometheus 0.0.4 and OpenMetrics 1.0, which vLLM, SGLang, llama.cpp and `anvil-sim`
//! serve) into samples, and turn them into `scrapes` rows.
//!
//! The parser keeps every sample line as exposed (`name{labels} value [timestamp]`),
//! histogram `_bucket`/`_sum`/`_count` and `_total` suffixes included, each with its
//! family's `# TYPE` (so restart detection knows which series are counters); other comments
//! (`# HELP`, `# EOF`) and blank lines are skipped; a line that does not parse is skipped and
//! counted, never fatal. It is small enough to own rather than add a dependency.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::Duration;

use hyper::header::HeaderValue;

use super::config::MetricsTarget;
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

/// The family a sample belongs to for its `# TYPE`: the sample name itself when declared,
/// else the name without a `_total`, `_created`, `_bucket`, `_count` or `_sum` suffix.
fn family_type<'a>(types: &'a std::collections::HashMap<String, String>, metric: &str) -> &'a str {
    if let Some(t) = types.get(metric) {
        return t;
    }
    ["_total", "_created", "_bucket", "_count", "_sum"]
        .iter()
        .filter_map(|suffix| metric.strip_suffix(suffix))
        .find_map(|family| types.get(family))
        .map_or("", String::as_str)
}

/// Parse exposition text; returns the samples and how many sample lines were malformed.
pub fn parse(text: &str) -> (Vec<Sample>, usize) {
    let mut out = Vec::new();
    let mut bad = 0;
    let mut types: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split_whitespace();
            if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                types.insert(name.to_owned(), kind.to_owned());
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_line(line) {
            Some(mut s) => {
                s.metric_type = family_type(&types, &s.metric).to_owned();
                out.push(s)
            }
            None => bad += 1,
        }
    }
    (out, bad)
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

fn parse_line(line: &str) -> Option<Sample> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let metric = &line[..name_end];
    if metric.is_empty() {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut pairs: Vec<(String, String)> = Vec::new();
    if let Some(body) = rest.strip_prefix('{') {
        // key="value" pairs with \\, \" and \n escapes, separated by commas.
        let mut chars = body.char_indices().peekable();
        let mut end = None;
        loop {
            while chars
                .peek()
                .is_some_and(|(_, c)| *c == ',' || c.is_whitespace())
            {
                chars.next();
            }
            match chars.peek() {
                Some((i, '}')) => {
                    end = Some(*i + 1);
                    break;
                }
                None => break,
                _ => {}
            }
            let mut key = String::new();
            for (_, c) in chars.by_ref() {
                if c == '=' {
                    break;
                }
                key.push(c);
            }
            if chars.next().map(|(_, c)| c) != Some('"') {
                return None;
            }
            let mut value = String::new();
            let mut closed = false;
            while let Some((_, c)) = chars.next() {
                match c {
                    '\\' => match chars.next().map(|(_, c)| c) {
                        Some('n') => value.push('\n'),
                        Some(other) => value.push(other),
                        None => return None,
                    },
                    '"' => {
                        closed = true;
                        break;
                    }
                    c => value.push(c),
                }
            }
            if !closed {
                return None;
            }
            pairs.push((key.trim().to_owned(), value));
        }
        rest = &body[end?..];
    }
    let value = parse_value(rest.split_whitespace().next()?)?;
    Some(Sample {
        metric: metric.to_owned(),
        labels: canonical_labels(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        metric_type: String::new(),
        value,
    })
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
) -> Result<Vec<Sample>, ScrapeError> {
    let (status, body) = http::get(&target.server, &target.path, auth, timeout).await?;
    if !(200..300).contains(&status) {
        return Err(ScrapeError::Status {
            url: target.url.clone(),
            status,
        });
    }
    Ok(parse(&String::from_utf8_lossy(&body)).0)
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
    msgs: Sender<Msg>,
    origin: Origin,
    notices: Notices,
}

/// The once-a-second `during` scrapes, until [`During::stop`].
pub struct During {
    stop: Cancel,
    task: tokio::task::JoinHandle<()>,
}

impl During {
    /// Stop scraping and wait for the round in progress.
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
                Ok(samples) => {
                    let t = self.origin.elapsed_ns();
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
        let stop = Cancel::new();
        let (this, until) = (self.clone(), stop.clone());
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            loop {
                tokio::select! {
                    () = until.cancelled() => break,
                    _ = tick.tick() => {}
                }
                this.round(ScrapePhase::During).await;
            }
        });
        During { stop, task }
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
        let (s, bad) = parse(text);
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
        let (s, bad) = parse(text);
        assert_eq!(bad, 0);
        let types: Vec<&str> = s.iter().map(|s| s.metric_type.as_str()).collect();
        assert_eq!(types, ["counter", "counter", "histogram", "histogram"]);
    }
}
