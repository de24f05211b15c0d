# anvil recipes. Conveniences only: `.ci/run` and the README's commands do not need `just`.

# List the recipes.
default:
    @just --list

# Build the three binaries with the dev profile every README command uses (then
# `export PATH="$PWD/target/debug:$PATH"`).
build:
    cargo build --bins


# The README's test command.
test:
    cargo test

# Formatting and lints, as CI runs them.
lint:
    cargo fmt --all -- --check
    cargo clippy --all-targets -- -D warnings

# Everything CI runs, on this checkout.
ci:
    bash .ci/run

# Run the simulator on :8000 (extra arguments go to anvil-sim, e.g. `just sim --replicas 2`).
sim *ARGS:
    cargo run --bin anvil-sim -- {{ARGS}}

# Validate the seeds in sample-data/.
validate:
    cargo run --bin anvil -- validate sample-data

# The campaign report of sample-data/ into reports/campaign.html (the README's main job).
report *ARGS:
    cargo run --bin anvil -- report {{ARGS}}

# Record a small campaign against in-process simulators and report it (prints the path).
demo *ARGS:
    cargo run --bin anvil -- demo {{ARGS}}

# Re-record the synthetic sample campaign in sample-data/ through the managed path (every
# arm of the plan an anvil-sim process, relaunched per repeat with its own run speed; 66
# cells, the headline arms' three repeats each interleaved across their stage, the
# manifest's five contexts, and the three topologies' capacity searches, 57 probes of the
# headline workload: about 105 minutes on 2 cores at the simulator profiles' own speed),
# then regenerate reports/campaign.html.
sample-data:
    cargo build --bins
    rm -rf "sample-data/2026-09-04-qwen38-27b-pro6000-possibility"
    PATH="$PWD/target/debug:$PATH" target/debug/anvil campaign run sample-data/campaign.json --out sample-data --stop-after-restore
    target/debug/anvil report

# The recorder's timing error and CPU against the simulator's truth at 16/64/256 streams, beside
# a peer client (aiohttp, installed into target/bench-venv) and a bare reader (the floor) in the
# same run (BENCHMARKS.md). The recorder's targets are judged on `just bench-fidelity 256 3 128 5`:
# 256 streams x 768 requests of 128 tokens, five alternating runs, medians printed last.
bench-fidelity levels="16,64,256" rounds="4" words="250" repeats="1":
    #!/usr/bin/env bash
    set -euo pipefail
    export FIDELITY_LEVELS="{{levels}}" FIDELITY_ROUNDS="{{rounds}}" FIDELITY_WORDS="{{words}}" FIDELITY_REPEATS="{{repeats}}"
    if ! target/bench-venv/bin/python3 -c 'import aiohttp' 2>/dev/null; then
        python3 -m venv target/bench-venv
        target/bench-venv/bin/pip install --quiet aiohttp
    fi
    cargo bench --profile release --no-default-features --bench fidelity

# The recorder alone for about a million events (256 streams x 16 requests of ~250 tokens,
# about 90 s): its resident set at each tenth of the events (BENCHMARKS.md).
bench-soak:
    FIDELITY_LEVELS=256 FIDELITY_ROUNDS=16 FIDELITY_ONLY_ANVIL=1 cargo bench --profile release --no-default-features --bench fidelity

# Time `anvil sql` computing cell_stats against DuckDB (Python) running the equivalent SQL on
# the same files: a synthetic artifact of REQUESTS x 250 events (40000 -> 10M events), made
# once with the artifact writer under the target dir. Needs `pip install pyarrow duckdb`.
# Results in BENCHMARKS.md. The release build is the one that means anything here (a cold
# build of the full stack takes about 37 minutes on 2 cores); `just bench-sql 40000 dev`
# times the debug build.
bench-sql requests="40000" profile="release":
    #!/usr/bin/env bash
    set -euo pipefail
    target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
    out=$([ "{{profile}}" = dev ] && echo debug || echo "{{profile}}")
    cargo build --profile {{profile}} --bin anvil --example synthetic_artifact
    data="$target/bench-sql/{{requests}}"
    if [ ! -f "$data/.complete" ]; then
        rm -rf "$data"
        "$target/$out/examples/synthetic_artifact" "$data" --requests {{requests}}
        touch "$data/.complete"
    fi
    python3 bench/bench_sql.py "$target/$out/anvil" "$data"

# anvil beyond one machine against plain baselines in the same run (BENCHMARKS.md): cell_stats
# over the 10M-event synthetic artifact on an S3 server on loopback (moto) against a ranged-GET
# loop over the same bytes; opening 1,000 small artifacts against list-and-get; two local
# workers against one process. Release build with the distributed engine (a cold build took
# 31 minutes of wall time on 2 cores, 2026-12-03). Needs `pip install "moto[server]" pyarrow`.
bench-remote runs="5":
    #!/usr/bin/env bash
    set -euo pipefail
    target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
    cargo build --release --features distributed --bin anvil --example synthetic_artifact --example s3_baseline
    data="$target/bench-sql/40000"
    if [ ! -f "$data/.complete" ]; then
        rm -rf "$data"
        "$target/release/examples/synthetic_artifact" "$data" --requests 40000
        touch "$data/.complete"
    fi
    python3 bench/bench_remote.py "$target/release/anvil" "$target/release/examples/s3_baseline" \
        "$target/release/examples/synthetic_artifact" "$data" "$target/bench-remote/many" {{runs}}

# Fuzz one target (sse_framer, documents, event_parser, artifact_reader) for SECONDS, or all
# of them one after another: `just fuzz`, `just fuzz documents 60`. Needs the nightly
# toolchain and `cargo install cargo-fuzz`; crashing inputs land in fuzz/artifacts/<target>/
# and belong in tests/it/corpus/ once fixed. Not part of CI.
fuzz target="all" seconds="600":
    #!/usr/bin/env bash
    set -euo pipefail
    cd fuzz
    targets="{{target}}"
    if [ "$targets" = all ]; then targets="sse_framer documents event_parser artifact_reader"; fi
    for t in $targets; do
        mkdir -p "corpus/$t"
        cargo +nightly fuzz run -O "$t" "corpus/$t" seeds/"$t" -- -max_total_time={{seconds}} -rss_limit_mb=2048 -timeout=10
    done

# Import cycles between the modules and between the folders, and imports up the README's
# layer table (scripts/module_cycles.py; `--edges` lists the edges inside each cycle, `--tree`
# prints the module tree with each module's first doc line).
cycles *ARGS:
    python3 scripts/module_cycles.py src --layers README.md {{ARGS}}

# On a GPU machine: read nvidia-smi and NVML for SECONDS (put the GPUs to work meanwhile) and
# hold each GPU's energy counter against its power integrated over the same time, within 5%
# (`anvil-capture gpu-check`; its table goes into BENCHMARKS.md).
gpu-check seconds="60":
    cargo build --bin anvil-capture
    target/debug/anvil-capture gpu-check --seconds {{seconds}}
