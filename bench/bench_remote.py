"""anvil beyond one machine, each against a plain baseline in the same run (BENCHMARKS.md):

1. `anvil sql` of cell_stats over the 10M-event synthetic artifact on an S3 server on
   loopback (moto), against a plain ranged-GET loop (examples/s3_baseline.rs, the same
   object_store client) reading the same bytes from the same server: the column chunks of
   the columns the query's plan scans, taken from the plan (EXPLAIN) and the Parquet footers.
2. Opening a prefix of 1,000 small artifacts (`anvil sql "SELECT count(*) FROM runs"`,
   with an empty cache each time and with the cache kept) against the server's raw listing
   plus a GET of every run.json and every Parquet footer.
3. cell_stats through two local `anvil worker`s against one process, over the local folder.

usage: python3 bench/bench_remote.py ANVIL S3_BASELINE SYNTHETIC_ARTIFACT BIG_DIR SMALL_ROOT [RUNS]

ANVIL must be built with `--features distributed` (part 3). Needs `moto[server]` and pyarrow.
Every time is the wall time of a process (start-up included on both sides); the cases
alternate, RUNS times each (5 by default), after one warm-up each; best and median are printed
with their ratios.
"""

import csv
import io
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import pyarrow.parquet as pq

anvil, baseline, synthetic, big, small_root = sys.argv[1:6]
runs = int(sys.argv[6]) if len(sys.argv) > 6 else 5
CELL_STATS = "SELECT * FROM cell_stats ORDER BY run_id, window, metric_order"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load():
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(cmd, env, out=None):
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    if out is not None:
        out.append(done.stdout)
    return took


def race(cases, env):
    """Run each case once to warm up, then RUNS rounds alternating; {name: [seconds]}."""
    times = {name: [] for name, _ in cases}
    for name, cmd in cases:
        timed(cmd(), env)
    for _ in range(runs):
        for name, cmd in cases:
            times[name].append(timed(cmd(), env))
    return times


def report(title, times, subject, base):
    print(f"\n{title} (load average {load()})")
    for name, t in times.items():
        print(f"  {name:<44} best {min(t):7.3f} s  median {statistics.median(t):7.3f} s  runs "
              + " ".join(f"{x:.3f}" for x in t))
    a, b = times[subject], times[base]
    print(f"  ratio {subject} / {base}: best {min(a) / min(b):.2f}, "
          f"median {statistics.median(a) / statistics.median(b):.2f}")


def rows(text):
    """CSV rows sorted, decimals to 9 significant digits (sums split differently differ in
    their last bits)."""
    def cell(v):
        try:
            return f"{float(v):.9g}" if "." in v else v
        except ValueError:
            return v
    return sorted(tuple(cell(v) for v in r) for r in csv.reader(io.StringIO(text)))


def scanned_columns(plan):
    """{table file name: set of column names} the plan's Parquet scans read."""
    wanted = {}
    for line in plan.splitlines():
        if "DataSourceExec" not in line or "projection=[" not in line:
            continue
        files = set(re.findall(r"/([a-z]+\.parquet)", line))
        projection = line.split("projection=[", 1)[1].split("]", 1)[0]
        names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", projection))
        for f in files:
            wanted.setdefault(f, set()).update(names)
    return wanted


def column_ranges(path, columns):
    """Byte ranges of `columns`' chunks in every row group of the Parquet file at `path`."""
    meta = pq.ParquetFile(path).metadata
    ranges = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            if chunk.path_in_schema not in columns:
                continue
            start = chunk.data_page_offset
            if chunk.has_dictionary_page and chunk.dictionary_page_offset is not None:
                start = min(start, chunk.dictionary_page_offset)
            ranges.append([start, start + chunk.total_compressed_size])
    return ranges


def main():
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    cache = tempfile.mkdtemp(prefix="anvil-bench-cache-")
    env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIABENCH", AWS_SECRET_ACCESS_KEY="bench-secret",
               AWS_REGION="us-east-1", AWS_ENDPOINT_URL=endpoint, AWS_ALLOW_HTTP="true",
               ANVIL_CACHE_DIR=cache)
    moto = subprocess.Popen(["moto_server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers = []
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        import boto3
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                     aws_access_key_id="AKIABENCH",
                     aws_secret_access_key="bench-secret").create_bucket(Bucket="bench")
        print(f"moto {subprocess.run(['python3', '-c', 'import moto; print(moto.__version__)'], capture_output=True, text=True).stdout.strip()} "
              f"on {endpoint}; {os.cpu_count()} cores; load average {load()}")

        # 1. cell_stats in place against a ranged-GET loop over the same bytes.
        pushed = subprocess.run([anvil, "push", big, "s3://bench/big/"], env=env,
                                capture_output=True, text=True, check=True)
        url = pushed.stdout.strip()
        out = []
        timed([anvil, "sql", "--data", url, "--format", "csv", "EXPLAIN " + CELL_STATS], env, out)
        columns = scanned_columns(out[0])
        wanted, total, schema = [], 0, {}
        for root, _, files in os.walk(big):
            for f in files:
                if f in columns:
                    schema[f] = set(pq.ParquetFile(os.path.join(root, f)).schema_arrow.names)
                    rel = os.path.relpath(os.path.join(root, f), os.path.dirname(big.rstrip("/")))
                    r = column_ranges(os.path.join(root, f), columns[f])
                    total += sum(e - s for s, e in r)
                    wanted.append({"key": f"big/{rel}", "ranges": r})
        ranges_file = os.path.join(cache, "ranges.json")
        with open(ranges_file, "w") as fh:
            json.dump(wanted, fh)
        scans = "; ".join(k + ": " + ", ".join(sorted(v & schema[k])) for k, v in sorted(columns.items()))
        print(f"\n1. the plan scans {scans}"
              f"\n   {total / 1e6:.1f} MB of column chunks in {sum(len(w['ranges']) for w in wanted)} ranges")
        for flags in (["--concurrency", "8"], ["--coalesce"]):
            out = []
            timed([baseline, "ranges", "s3://bench", ranges_file] + flags, env, out)
            print(f"   baseline {' '.join(flags)}: {out[0].strip()}")
        here, there = [], []
        timed([anvil, "sql", "--data", big, "--format", "csv", CELL_STATS], env, here)
        timed([anvil, "sql", "--data", url, "--format", "csv", CELL_STATS], env, there)
        assert rows(here[0]) == rows(there[0]), "cell_stats over S3 differs from the folder's"
        times = race([
            ("anvil sql cell_stats from S3", lambda: [anvil, "sql", "--data", url, "--format", "csv", CELL_STATS]),
            ("one GET per column chunk, 8 in flight", lambda: [baseline, "ranges", "s3://bench", ranges_file, "--concurrency", "8"]),
            ("chunks coalesced (object_store get_ranges)", lambda: [baseline, "ranges", "s3://bench", ranges_file, "--coalesce"]),
            ("anvil sql cell_stats from the folder", lambda: [anvil, "sql", "--data", big, "--format", "csv", CELL_STATS]),
        ], env)
        report("1. cell_stats over 10M events in place", times, "anvil sql cell_stats from S3",
               "one GET per column chunk, 8 in flight")
        for other in ("chunks coalesced (object_store get_ranges)", "anvil sql cell_stats from the folder"):
            a, b = times["anvil sql cell_stats from S3"], times[other]
            print(f"  ratio anvil sql cell_stats from S3 / {other}: best {min(a) / min(b):.2f}, "
                  f"median {statistics.median(a) / statistics.median(b):.2f}")

        # 2. Opening a prefix of 1,000 artifacts against list-and-get.
        done = os.path.join(small_root, ".complete")
        if not os.path.exists(done):
            shutil.rmtree(small_root, ignore_errors=True)
            for i in range(1000):
                subprocess.run([synthetic, small_root, "--requests", "8", "--events-per-request", "10",
                                "--replicas", "1", "--cell", f"c{i:04d}"], check=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            open(done, "w").close()
        started = time.perf_counter()
        pushed = subprocess.run([anvil, "push", small_root, "s3://bench/many/"], env=env,
                                capture_output=True, text=True, check=True)
        many = pushed.stdout.strip()
        print(f"\n2. pushed 1,000 artifacts in {time.perf_counter() - started:.1f} s: {pushed.stderr.strip()}")
        out = []
        timed([baseline, "open", many], env, out)
        print(f"   baseline: {out[0].strip()}")
        count = []
        timed([anvil, "sql", "--data", many, "--format", "csv", "SELECT count(*) FROM runs"], env, count)
        assert count[0].split()[-1] == "1000", count[0]

        def cold():
            shutil.rmtree(os.path.join(cache, "objects"), ignore_errors=True)
            return [anvil, "sql", "--data", many, "--format", "csv", "SELECT count(*) FROM runs"]
        times = race([
            ("anvil opening 1,000 artifacts, empty cache", cold),
            ("list + GET run.json and footers, 16 at once", lambda: [baseline, "open", many]),
            ("anvil opening 1,000 artifacts, cache kept", lambda: [anvil, "sql", "--data", many, "--format", "csv", "SELECT count(*) FROM runs"]),
        ], env)
        report("2. opening a prefix of 1,000 artifacts", times,
               "anvil opening 1,000 artifacts, empty cache", "list + GET run.json and footers, 16 at once")
        print(f"  ratio with the cache kept: best "
              f"{min(times['anvil opening 1,000 artifacts, cache kept']) / min(times['list + GET run.json and footers, 16 at once']):.2f}")

        # 3. Two local workers against one process.
        for _ in range(2):
            w = subprocess.Popen([anvil, "worker", "--listen", "127.0.0.1:0"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            workers.append((w, w.stdout.readline().strip().rsplit(" ", 1)[-1]))
        urls = ",".join(u for _, u in workers)
        distributed = []
        timed([anvil, "sql", "--data", big, "--format", "csv", "--workers", urls, CELL_STATS], env, distributed)
        assert rows(here[0]) == rows(distributed[0]), "cell_stats through the workers differs"
        plan = []
        timed([anvil, "sql", "--data", big, "--workers", urls, "EXPLAIN ANALYZE " + CELL_STATS], env, plan)
        stages = sorted(set(re.findall(r"Stage \d+ ── tasks=\d+", plan[0])))
        print(f"\n3. through {urls}: {'; '.join(stages)}")
        times = race([
            ("anvil sql cell_stats, two workers", lambda: [anvil, "sql", "--data", big, "--format", "csv", "--workers", urls, CELL_STATS]),
            ("anvil sql cell_stats, one process", lambda: [anvil, "sql", "--data", big, "--format", "csv", CELL_STATS]),
        ], env)
        report("3. cell_stats over 10M events, local folder", times,
               "anvil sql cell_stats, two workers", "anvil sql cell_stats, one process")
    finally:
        for w, _ in workers:
            w.kill()
        moto.kill()
        shutil.rmtree(cache, ignore_errors=True)


main()
