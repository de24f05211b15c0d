//! A DCGM exporter's `/metrics` (Prometheus text, e.g. `http://gpu-host:9400/metrics`): one
//! series per field and GPU, labelled `gpu`, `UUID`, `modelName` and `Hostname` (and, in
//! Kubernetes, the pod's labels, which are kept out).
//!
//! The exporter's default counter set (`etc/default-counters.csv`) has power, the energy
//! counter, SM and memory clocks, both temperatures, utilisation and memory used; the
//! clock-event reasons, the power limit, the slowdown temperature, the maximum SM clock and
//! the violation counters exist only when its collectors file names them, so a reading says
//! which fields are absent ([`super::Reading::absent`]). The exporter also exposes string
//! fields (`DCGM_FI_DEV_NAME`, `DCGM_FI_DRIVER_VERSION`) whose values are not numbers: they
//! are not telemetry and are skipped without counting as broken lines.

use super::{Field, Gpu, Reading, Value};

/// The DCGM field names anvil reads, each with its field (DCGM's units are anvil's).
pub const FIELDS: &[(&str, Field)] = &[
    ("DCGM_FI_DEV_POWER_USAGE", Field::PowerW),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", Field::EnergyMj),
    ("DCGM_FI_DEV_SM_CLOCK", Field::SmClockMhz),
    ("DCGM_FI_DEV_MEM_CLOCK", Field::MemClockMhz),
    ("DCGM_FI_DEV_MAX_SM_CLOCK", Field::MaxSmClockMhz),
    ("DCGM_FI_DEV_GPU_TEMP", Field::GpuTempC),
    ("DCGM_FI_DEV_MEMORY_TEMP", Field::MemTempC),
    ("DCGM_FI_DEV_GPU_UTIL", Field::GpuUtilPct),
    ("DCGM_FI_DEV_FB_USED", Field::FbUsedMib),
    ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", Field::PowerLimitW),
    ("DCGM_FI_DEV_SLOWDOWN_TEMP", Field::SlowdownTempC),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", Field::ClockEventReasons),
    (
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        Field::ClockEventReasons,
    ),
    ("DCGM_FI_DEV_POWER_VIOLATION", Field::PowerViolationNs),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", Field::ThermalViolationNs),
];

/// The collectors-file lines (`DCGM FIELD, Prometheus type, help`) that give anvil what the
/// default set lacks: the README's advice, and what a reading's absent fields point to. The
/// reasons are one field (112) under two names: DCGM 3.3 on knows the new one, and an
/// older exporter refuses it, so the old name is the commented alternative.
pub const EXTRA_COLLECTORS: &str = "\
DCGM_FI_DEV_CLOCKS_EVENT_REASONS,   gauge,   Current clock event reasons (bitmask).
# before DCGM 3.3, instead: DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, gauge, Current clock throttle reasons (bitmask).
DCGM_FI_DEV_ENFORCED_POWER_LIMIT,   gauge,   Enforced power limit (in W).
DCGM_FI_DEV_SLOWDOWN_TEMP,          gauge,   Slowdown temperature (in C).
DCGM_FI_DEV_MAX_SM_CLOCK,           gauge,   Maximum SM clock (in MHz).
DCGM_FI_DEV_POWER_VIOLATION,        counter, Throttling duration due to power constraints (in ns).
DCGM_FI_DEV_THERMAL_VIOLATION,      counter, Throttling duration due to thermal constraints (in ns).
";

/// The field a DCGM series name stands for.
pub fn field_of(name: &str) -> Option<Field> {
    FIELDS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// Whether `line` is a sample of a DCGM field anvil does not read whose value is not a
/// number (a string field such as the device name), which the exposition grammar would
/// count as broken. A field anvil reads is never blanked: its broken line is counted.
fn string_field(line: &str) -> bool {
    let name_end = line.find(['{', ' ', '\t']).unwrap_or(line.len());
    if !line.starts_with("DCGM_") || field_of(&line[..name_end]).is_some() {
        return false;
    }
    let rest = match line.rfind('}') {
        Some(at) => &line[at + 1..],
        None => line.split_once([' ', '\t']).map_or("", |(_, r)| r),
    };
    rest.split_whitespace()
        .next()
        .is_some_and(|v| v.parse::<f64>().is_err())
}

/// Read one `/metrics` body.
pub fn read(body: &[u8]) -> Reading {
    // String fields blanked, not removed: line numbers stay those of the body, and a line
    // that is not UTF-8 stays for the grammar to count as broken.
    let kept: Vec<&[u8]> = body
        .split(|&b| b == b'\n')
        .map(|l| match std::str::from_utf8(l) {
            Ok(text) if string_field(text) => &[][..],
            _ => l,
        })
        .collect();
    let exposition = crate::capture::exposition::read_bytes(&kept.join(&b'\n'));
    let mut out = Reading {
        bad_lines: exposition.bad_lines,
        first_error: exposition.first_error,
        ..Reading::default()
    };
    for s in exposition.samples {
        let Some(field) = field_of(&s.name) else {
            continue;
        };
        let label = |k: &str| {
            s.labels
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        let Some(index) = label("gpu").and_then(|g| g.parse::<u32>().ok()) else {
            continue;
        };
        let gpu = Gpu {
            index,
            uuid: label("UUID").or_else(|| label("uuid")),
            model: label("modelName"),
            host: label("Hostname"),
        };
        if !s.value.is_finite() {
            out.unavailable.push((index, field));
            continue;
        }
        out.values.push(Value {
            gpu,
            field,
            value: s.value,
            source_time: s.timestamp.map(|t| t.to_string()),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::telemetry::Reasons;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!(
            "{}/tests/fixtures/telemetry/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    #[test]
    fn the_default_counter_set_reads_per_gpu_and_names_what_it_lacks() {
        let r = read(&fixture("dcgm-default.prom"));
        assert_eq!((r.bad_lines, &r.first_error), (0, &None));
        let gpus = r.gpus();
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[0].model.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(gpus[1].host.as_deref(), Some("gpu-node-7"));
        assert!(gpus[0].uuid.as_deref().unwrap().starts_with("GPU-"));
        assert_eq!(r.get(0, Field::PowerW), Some(612.58));
        assert_eq!(r.get(1, Field::EnergyMj), Some(88_211_447_012.0));
        assert_eq!(r.get(1, Field::SmClockMhz), Some(990.0));
        assert_eq!(r.get(0, Field::FbUsedMib), Some(74_213.0));
        assert_eq!(
            r.absent(),
            [
                Field::MaxSmClockMhz,
                Field::PowerLimitW,
                Field::SlowdownTempC,
                Field::ClockEventReasons,
                Field::PowerViolationNs,
                Field::ThermalViolationNs
            ]
        );
    }

    #[test]
    fn the_extended_set_gives_reasons_limits_and_violations_under_either_name() {
        let r = read(&fixture("dcgm-extended.prom"));
        assert_eq!((r.bad_lines, &r.first_error), (0, &None), "{r:?}");
        assert!(r.absent().is_empty(), "{:?}", r.absent());
        assert_eq!(r.get(0, Field::PowerLimitW), Some(700.0));
        assert_eq!(r.get(0, Field::PowerViolationNs), Some(48_211_000_000.0));
        assert_eq!(r.get(0, Field::SlowdownTempC), Some(87.0));
        // GPU 0 at its power limit (SW power cap), GPU 1 thermally slowed down (HW slowdown
        // with HW thermal slowdown, as NVML reports a GPU past its slowdown temperature).
        let reasons = |g| Reasons(r.get(g, Field::ClockEventReasons).unwrap() as u64);
        assert!(reasons(0).at_power_limit() && !reasons(0).throttled());
        assert!(reasons(1).throttled());
        assert_eq!(reasons(1).names(), ["hw_slowdown", "hw_thermal_slowdown"]);
        assert_eq!(r.get(1, Field::ThermalViolationNs), Some(1_250_000_000.0));
        assert_eq!(r.get(1, Field::MaxSmClockMhz), Some(1980.0));
        // An exporter before DCGM 3.3 names the reasons the old way; a sample's own time
        // stamp is kept as written.
        let old =
            read(b"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu=\"3\",UUID=\"GPU-d\"} 8 1765141200000\n");
        assert_eq!(old.get(3, Field::ClockEventReasons), Some(8.0));
        assert_eq!(old.values[0].source_time.as_deref(), Some("1765141200000"));
        assert!(Reasons(8).throttled());
    }

    #[test]
    fn string_fields_are_skipped_and_broken_lines_named() {
        let text = "DCGM_FI_DEV_NAME{gpu=\"0\",UUID=\"GPU-a\"} NVIDIA H100\n\
                    DCGM_FI_DRIVER_VERSION{gpu=\"0\"} 570.86.15\n\
                    DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\"} 81.5\n\
                    DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"GPU-a\"} NaN\n\
                    DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"GPU-a\" 1410\n\
                    DCGM_FI_DEV_MEM_CLOCK{UUID=\"GPU-a\"} 2619\n\
                    DCGM_FI_DEV_FB_FREE{gpu=\"0\"} 81.5MiB\n\
                    DCGM_FI_DEV_FB_USED{gpu=\"0\"} 81.5MiB\n";
        let mut body = text.as_bytes().to_vec();
        body.extend_from_slice(b"DCGM_FI_DEV_FB_USED{gpu=\"0\"} 7\xff\n");
        let r = read(&body);
        assert_eq!(r.get(0, Field::PowerW), Some(81.5));
        assert_eq!(r.unavailable, [(0, Field::GpuTempC)]);
        // A field anvil reads with a broken value is counted (FB_USED); one it does not
        // read is skipped (FB_FREE).
        assert_eq!(r.bad_lines, 3, "{r:?}");
        assert_eq!(r.first_error.as_ref().map(|e| e.0), Some(5));
        // A series without a GPU index is no GPU's.
        assert_eq!(r.values.len(), 1);
    }
}
