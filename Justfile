# anvil recipes. Conveniences only: `.ci/run` and the README's commands do not need `just`.

# List the recipes.
default:
    @just --list

# Build all binaries with the lean dev profile.
build:
    cargo build --bins

# Build the binaries with the main-job profile (opt-level 1, see README "Build profiles").
build-fast:
    cargo build --profile fast --bins

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
    cargo run --profile fast --no-default-features --bin anvil-sim -- {{ARGS}}

# Validate the seeds in sample-data/.
validate:
    cargo run --profile fast --bin anvil -- validate sample-data

# The recorder's timing error against the simulator's truth at 16/64/256 streams (BENCHMARKS.md).
bench-fidelity:
    cargo bench --profile fast --no-default-features --bench fidelity
