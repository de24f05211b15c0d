"""Time `anvil sql` computing cell_stats over an artifact tree against DuckDB running the
equivalent SQL on the same Parquet files, and the current cell_stats (both windows, every
percentile's interval) and percentile_ci against the definition before them
(bench/cell_stats_baseline.sql) in the same run. Prints every time (best of N runs, 7 by
default, the cases alternating), and the ratios of the best times and of the medians.

usage: python3 bench/bench_sql.py ANVIL_BINARY DATA_DIR [RUNS]

The DuckDB query follows queries/10_request_timing.sql, 20_request_figures.sql and
40_cell_stats.sql step for step (first non-empty content delta, usage tokens, the six
metrics, unpivot, arm and cell from run.json, statistics). Two differences, both negligible in cost: percentiles use
DuckDB's quantile_disc (anvil registers nearest_rank), and the 95% CI uses 1.96 instead of
the Student t quantile (DuckDB has no t quantile function).
"""

import glob
import os
import statistics
import subprocess
import sys
import time

import duckdb

anvil, data = sys.argv[1], sys.argv[2]
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 7
dirs = sorted(os.path.dirname(p) for p in glob.glob(f"{data}/**/run.json", recursive=True))
if not dirs:
    sys.exit(f"no artifact (run.json) under {data}")
run_jsons = [f"{d}/run.json" for d in dirs]
requests = [f"{d}/requests.parquet" for d in dirs]
events = [f"{d}/events.parquet" for d in dirs]

METRICS = ["ttft_ms", "effective_prefill_tps", "decode_tps", "tpot_ms", "itl_ms", "e2e_ms"]
cases = "\n".join(f"WHEN '{m}' THEN f.{m}" for m in METRICS)
UNITS = ["ms", "tok/s", "tok/s", "ms", "ms", "ms"]
values = ", ".join(f"({i + 1}, '{m}', '{u}')" for i, (m, u) in enumerate(zip(METRICS, UNITS)))
pct = ",\n".join(
    f"quantile_disc(value, {p}) AS p{int(round(p * 100))}" for p in (0.25, 0.5, 0.75, 0.9, 0.95, 0.99)
)
DUCK_SQL = f"""
WITH per_request AS (
    SELECT run_id, request_index,
           min(t_ns) FILTER (WHERE content_delta <> '') AS t_first_content_ns,
           max(usage_prompt_tokens) AS usage_prompt_tokens,
           max(usage_completion_tokens) AS usage_completion_tokens
    FROM read_parquet({events!r})
    GROUP BY run_id, request_index
),
t AS (
    SELECT r.run_id, r.request_index, r.outcome,
           e.t_first_content_ns - r.t_sent_ns AS ttft_ns,
           r.t_done_ns - e.t_first_content_ns AS generation_ns,
           r.t_done_ns - r.t_sent_ns AS e2e_ns,
           e.usage_prompt_tokens,
           CASE WHEN e.usage_completion_tokens > 1 THEN e.usage_completion_tokens - 1 END AS k
    FROM read_parquet({requests!r}) r
    LEFT JOIN per_request e ON e.run_id = r.run_id AND e.request_index = r.request_index
    WHERE r.kind = 'measured'
),
f AS (
    SELECT run_id, outcome,
           CAST(ttft_ns AS DOUBLE) / 1e6 AS ttft_ms,
           CAST(usage_prompt_tokens AS DOUBLE) / (CAST(nullif(ttft_ns, 0) AS DOUBLE) / 1e9) AS effective_prefill_tps,
           CAST(k AS DOUBLE) / (CAST(nullif(generation_ns, 0) AS DOUBLE) / 1e9) AS decode_tps,
           (CAST(nullif(generation_ns, 0) AS DOUBLE) / 1e6) / CAST(k AS DOUBLE) AS tpot_ms,
           (CAST(nullif(generation_ns, 0) AS DOUBLE) / 1e6) / CAST(k AS DOUBLE) AS itl_ms,
           CAST(e2e_ns AS DOUBLE) / 1e6 AS e2e_ms
    FROM t
),
long AS (
    SELECT f.run_id, f.outcome, m.metric_order, m.metric, m.unit,
           CASE WHEN f.outcome = 'ok' THEN CASE m.metric {cases} END END AS value
    FROM f CROSS JOIN (VALUES {values}) m(metric_order, metric, unit)
),
runs AS (
    SELECT run_id, arm.name AS arm, cell_id FROM read_json({run_jsons!r})
)
SELECT l.run_id, r.arm, r.cell_id, metric_order, metric, unit,
       count(value) AS n,
       count(*) FILTER (WHERE outcome = 'ok') - count(value) AS n_null,
       count(*) FILTER (WHERE outcome <> 'ok') AS failed,
       avg(value) AS mean, stddev_samp(value) AS sd,
       avg(value) - 1.96 * stddev_samp(value) / sqrt(count(value)) AS ci95_low,
       avg(value) + 1.96 * stddev_samp(value) / sqrt(count(value)) AS ci95_high,
       min(value) AS min,
       {pct},
       max(value) AS max
FROM long l
JOIN runs r ON r.run_id = l.run_id
GROUP BY l.run_id, r.arm, r.cell_id, metric_order, metric, unit
ORDER BY l.run_id, metric_order
"""


BASELINE = open(os.path.join(os.path.dirname(__file__), "cell_stats_baseline.sql")).read()


def time_sql(sql, *flags):
    start = time.perf_counter()
    out = subprocess.run(
        [anvil, "sql", "--data", data, "--format", "csv", *flags, "--", sql],
        capture_output=True, text=True,
    )
    elapsed = time.perf_counter() - start
    if out.returncode != 0:
        sys.exit(f"anvil sql failed: {out.stderr}")
    return elapsed, out.stdout


# The DuckDB comparison: the `all` window, DuckDB's query computing only it.
ALL_WINDOW = "SELECT * FROM cell_stats WHERE window = 'all' ORDER BY run_id, metric_order"
CASES = {
    "baseline cell_stats (one window, no intervals)": (
        BASELINE + " SELECT * FROM baseline_cell_stats ORDER BY run_id, metric_order",
        ("--allow-write",),
    ),
    "cell_stats (both windows, percentile intervals)": (
        "SELECT * FROM cell_stats ORDER BY run_id, window, metric_order",
        (),
    ),
    "percentile_ci": (
        "SELECT * FROM percentile_ci ORDER BY run_id, window, metric_order, percentile",
        (),
    ),
}


def time_anvil():
    return time_sql(ALL_WINDOW)


def time_duckdb():
    start = time.perf_counter()
    con = duckdb.connect()
    relation = con.sql(DUCK_SQL)
    columns = relation.columns
    rows = [dict(zip(columns, r)) for r in relation.fetchall()]
    elapsed = time.perf_counter() - start
    con.close()
    return elapsed, rows


anvil_times, duck_times = [], []
case_times = {name: [] for name in CASES}
for _ in range(runs):
    t, anvil_out = time_anvil()
    anvil_times.append(t)
    t, duck_rows = time_duckdb()
    duck_times.append(t)
    for name, (sql, flags) in CASES.items():
        case_times[name].append(time_sql(sql, *flags)[0])

# The two must agree on every column but the percentiles and the CI (quantile_disc and
# 1.96 are not nearest rank and Student's t).
anvil_rows = [line.split(",") for line in anvil_out.strip().splitlines()[1:]]
header = anvil_out.splitlines()[0].split(",")
assert len(anvil_rows) == len(duck_rows), (len(anvil_rows), len(duck_rows))
for a, duck in zip(anvil_rows, duck_rows):
    row = dict(zip(header, a))
    d = duck
    for name in ("run_id", "arm", "cell_id", "metric", "unit"):
        assert row[name] == duck[name], (name, a, d)
    for name in ("metric_order", "n", "n_null", "failed"):
        assert int(row[name]) == duck[name], (name, a, d)
    for name in ("mean", "sd", "min", "max"):
        if duck[name] is not None:
            assert abs(float(row[name]) - duck[name]) <= 1e-9 * abs(duck[name]), (name, a, d)

events_rows = duckdb.sql(f"SELECT count(*) FROM read_parquet({events!r})").fetchall()[0][0]
best_anvil, best_duck = min(anvil_times), min(duck_times)
print(f"artifacts: {len(dirs)}, events: {events_rows:,}, runs: {runs} (best of)")
print(f"anvil sql cell_stats: {best_anvil:.2f} s  (all: {', '.join(f'{t:.2f}' for t in anvil_times)})")
print(f"duckdb    cell_stats: {best_duck:.2f} s  (all: {', '.join(f'{t:.2f}' for t in duck_times)})")
median_anvil, median_duck = statistics.median(anvil_times), statistics.median(duck_times)
print(f"ratio anvil/duckdb: {best_anvil / best_duck:.2f}  (medians {median_anvil:.2f} s / "
      f"{median_duck:.2f} s = {median_anvil / median_duck:.2f})")
base_name = next(iter(CASES))
base_best, base_median = min(case_times[base_name]), statistics.median(case_times[base_name])
for name, times in case_times.items():
    print(f"anvil sql {name}: {min(times):.2f} s  (all: {', '.join(f'{t:.2f}' for t in times)})")
for name, times in list(case_times.items())[1:]:
    print(f"ratio {name} / baseline: {min(times) / base_best:.2f}  "
          f"(medians {statistics.median(times) / base_median:.2f})")
