//! `nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits] [-lms N]` on the local
//! host: one line per GPU per sample, the fields in the order asked.
//!
//! With a header (`--format=csv`) the first line names the fields (`power.draw [W]`) and
//! the cells carry units (`612.58 W`, `100 %`); with `noheader,nounits` the field order is
//! the query's ([`read`] takes it). A cell `[N/A]` or `[Not Supported]` (and `N/A`) is the
//! GPU saying it has no such value: recorded as unavailable, never as a number. The
//! clock-event reasons are a hexadecimal mask under `clocks_event_reasons.active` (drivers
//! from 535) or `clocks_throttle_reasons.active` before; the recorder asks the new name and
//! falls back to [`query_legacy`] when nvidia-smi refuses it.

use super::{Field, Gpu, Reading, Value};

/// The fields anvil asks for, in order (drivers from 535).
pub const QUERY: &[&str] = &[
    "timestamp",
    "index",
    "uuid",
    "name",
    "power.draw",
    "enforced.power.limit",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "temperature.gpu",
    "temperature.memory",
    "utilization.gpu",
    "memory.used",
    "clocks_event_reasons.active",
];

/// [`QUERY`] for drivers that know the clock-event reasons by their old name
/// (`clocks_throttle_reasons.active`).
pub fn query_legacy() -> Vec<&'static str> {
    QUERY
        .iter()
        .map(|f| match *f {
            "clocks_event_reasons.active" => "clocks_throttle_reasons.active",
            other => other,
        })
        .collect()
}

/// The telemetry field an nvidia-smi query field stands for.
pub fn field_of(name: &str) -> Option<Field> {
    Some(match name {
        "power.draw" | "power.draw.instant" => Field::PowerW,
        "enforced.power.limit" => Field::PowerLimitW,
        "clocks.sm" | "clocks.current.sm" => Field::SmClockMhz,
        "clocks.mem" | "clocks.current.memory" => Field::MemClockMhz,
        "clocks.max.sm" => Field::MaxSmClockMhz,
        "temperature.gpu" => Field::GpuTempC,
        "temperature.memory" => Field::MemTempC,
        "utilization.gpu" => Field::GpuUtilPct,
        "memory.used" => Field::FbUsedMib,
        "clocks_event_reasons.active" | "clocks_throttle_reasons.active" => {
            Field::ClockEventReasons
        }
        _ => return None,
    })
}

/// Why a CSV could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SmiError {
    #[error("nvidia-smi gave no header line (run it with --format=csv, or name the fields)")]
    NoHeader,
    #[error("nvidia-smi's fields name no GPU index (`index`): the values cannot be told apart")]
    NoIndex,
}

/// Whether a cell is the GPU saying it has no value: `N/A`, or any bracketed message
/// (`[N/A]`, `[Not Supported]`, `[Insufficient Permissions]`, `[GPU requires reset]`).
fn unavailable(cell: &str) -> bool {
    cell == "N/A" || cell == "Not Supported" || (cell.starts_with('[') && cell.ends_with(']'))
}

/// A cell's number: its first word (a unit after it dropped), or a hexadecimal mask.
fn number(cell: &str) -> Option<f64> {
    let word = cell.split_whitespace().next()?;
    match word.strip_prefix("0x").or_else(|| word.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok().map(|v| v as f64),
        None => word.parse::<f64>().ok().filter(|v| v.is_finite()),
    }
}

/// Read nvidia-smi's CSV: `fields` in the order queried (`noheader`), or `None` when the
/// first line is its header (`power.draw [W]`, units dropped from the names).
pub fn read(text: &str, fields: Option<&[&str]>) -> Result<Reading, SmiError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let names: Vec<String> = match fields {
        Some(f) => f.iter().map(|s| (*s).to_owned()).collect(),
        None => {
            let (_, header) = lines.next().ok_or(SmiError::NoHeader)?;
            header
                .split(',')
                .map(|h| h.trim().split(" [").next().unwrap_or("").to_owned())
                .collect()
        }
    };
    let at = |name: &str| names.iter().position(|n| n == name);
    let index_at = at("index").ok_or(SmiError::NoIndex)?;
    let mut out = Reading::default();
    for (number_at, line) in lines {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let bad = |out: &mut Reading, why: String| {
            out.bad_lines += 1;
            out.first_error.get_or_insert((number_at + 1, why));
        };
        if cells.len() != names.len() {
            bad(
                &mut out,
                format!(
                    "{} cells where {} fields were asked",
                    cells.len(),
                    names.len()
                ),
            );
            continue;
        }
        let Some(index) = number(cells[index_at]).map(|i| i as u32) else {
            bad(
                &mut out,
                format!("index `{}` is not a number", cells[index_at]),
            );
            continue;
        };
        let text_at = |name: &str| {
            at(name)
                .map(|k| cells[k])
                .filter(|c| !c.is_empty() && !unavailable(c))
                .map(str::to_owned)
        };
        let gpu = Gpu {
            index,
            uuid: text_at("uuid"),
            model: text_at("name"),
            host: None,
        };
        let source_time = text_at("timestamp");
        let mut broken: Option<String> = None;
        for (k, name) in names.iter().enumerate() {
            let Some(field) = field_of(name) else {
                continue;
            };
            let cell = cells[k];
            if unavailable(cell) {
                out.unavailable.push((index, field));
                continue;
            }
            match number(cell) {
                Some(value) => out.values.push(Value {
                    gpu: gpu.clone(),
                    field,
                    value,
                    source_time: source_time.clone(),
                }),
                None => {
                    broken.get_or_insert_with(|| format!("{name} `{cell}` is not a number"));
                }
            }
        }
        // A line counts once, however many of its cells are broken; its good cells stay.
        if let Some(why) = broken {
            bad(&mut out, why);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::telemetry::Reasons;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/tests/fixtures/telemetry/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn noheader_nounits_reads_in_the_query_order_with_unavailable_cells_named() {
        let r = read(&fixture("nvidia-smi-nounits.csv"), Some(QUERY)).unwrap();
        assert_eq!((r.bad_lines, &r.first_error), (0, &None), "{r:?}");
        assert_eq!(r.gpus().len(), 2);
        // Two samples of two GPUs.
        assert_eq!(
            r.values.iter().filter(|v| v.field == Field::PowerW).count(),
            4
        );
        assert_eq!(r.get(0, Field::PowerW), Some(609.77), "the latest sample");
        assert_eq!(r.get(1, Field::PowerLimitW), Some(700.0));
        // GPU 1 does not report its memory temperature on this driver.
        assert!(r.unavailable.contains(&(1, Field::MemTempC)));
        assert_eq!(
            r.values[0].source_time.as_deref(),
            Some("2026/12/07 21:01:09.118")
        );
        let reasons = Reasons(r.get(1, Field::ClockEventReasons).unwrap() as u64);
        assert!(reasons.throttled() && !reasons.at_power_limit());
        // The latest of the two samples.
        assert_eq!(r.get(1, Field::SmClockMhz), Some(975.0));
        assert_eq!(r.gpus()[0].model.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    }

    #[test]
    fn a_header_names_the_fields_and_units_are_dropped_under_the_old_reasons_name() {
        let r = read(&fixture("nvidia-smi-legacy.csv"), None).unwrap();
        assert_eq!((r.bad_lines, &r.first_error), (0, &None), "{r:?}");
        assert_eq!(r.get(0, Field::PowerW), Some(301.2));
        assert_eq!(r.get(0, Field::SmClockMhz), Some(1410.0));
        assert_eq!(r.get(0, Field::GpuUtilPct), Some(97.0));
        assert_eq!(r.get(0, Field::ClockEventReasons), Some(0.0));
        assert!(r.unavailable.contains(&(0, Field::MemTempC)));
        assert!(r.unavailable.contains(&(0, Field::PowerLimitW)));
        let legacy = query_legacy();
        assert_eq!(legacy.len(), QUERY.len());
        assert_eq!(legacy.last(), Some(&"clocks_throttle_reasons.active"));
        assert_eq!(
            field_of(legacy[legacy.len() - 1]),
            field_of(QUERY[QUERY.len() - 1])
        );
    }

    #[test]
    fn broken_lines_are_counted_and_named_never_guessed() {
        let text = "2026/12/07 21:01:09.118, 0, GPU-a, NVIDIA H100, 90.5, 700.00\n\
                    2026/12/07 21:01:09.118, x, GPU-b, NVIDIA H100, 91.0, 700.00\n\
                    2026/12/07 21:01:09.118, 2, GPU-c, NVIDIA H100, lots, 700.00\n\
                    2026/12/07 21:01:09.118, 4, GPU-e, NVIDIA H100, lots, more\n\
                    2026/12/07 21:01:09.118, 5, GPU-f, NVIDIA H100, [Insufficient Permissions], 700.00\n\
                    2026/12/07 21:01:09.118, 3, GPU-d\n";
        // The query's first six fields: timestamp, index, uuid, name, power, limit.
        let r = read(text, Some(&QUERY[..6])).unwrap();
        assert_eq!(r.bad_lines, 4);
        assert!(r.unavailable.contains(&(5, Field::PowerW)));
        assert_eq!(r.first_error.as_ref().map(|e| e.0), Some(2));
        assert_eq!(r.get(0, Field::PowerW), Some(90.5));
        assert_eq!(r.get(2, Field::PowerLimitW), Some(700.0));
        assert_eq!(read("", None), Err(SmiError::NoHeader));
        assert_eq!(read("a, b\n1, 2\n", None), Err(SmiError::NoIndex));
    }
}
