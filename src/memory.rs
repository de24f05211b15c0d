//! The allocator's policy for long recordings: glibc's mmap threshold held at its default.
//!
//! glibc serves an allocation of at least `M_MMAP_THRESHOLD` bytes (128 KiB by default) with
//! its own `mmap` and returns it to the kernel when freed, but every such free also *raises*
//! the threshold to the freed block's size (up to 32 MiB on 64-bit), after which blocks of
//! that size come from the heap arenas instead (glibc `malloc/malloc.c`, "dynamic mmap
//! threshold"; `mallopt(3)`). The recorder's writer thread builds megabytes of transient
//! buffers once a second (the rolled rows' Arrow columns, Parquet pages, compression
//! buffers): after the first roll they land in the heap arenas, whose high-water marks then
//! rise in steps as their sizes and interleaving vary. Setting the threshold explicitly fixes
//! it (and turns the adjustment off) for the rest of the process.
//!
//! Measured with `just bench-soak` (256 streams, 1,056,768 events, BENCHMARKS.md), builds
//! alternated in the same hours: with the dynamic threshold the resident set between rolls
//! rose to 53–55 MB and peaked at 64–68 MB (three runs); with it fixed, 43–45 MB and 51–53 MB.
//! The price is CPU: the writer thread faults the freshly mapped pages in at every roll,
//! 0.1–1.7 µs more per event in five paired runs (mean 1.0, the writer's own +0.5), about 5%.
//! The largest of those buffers, the events table's columns, are now kept and reused from
//! roll to roll (`artifact::columns`): the writer's CPU per event fell from 1.5 to 1.1–1.2 µs
//! and the peak resident set from about 31 to 28 MB (BENCHMARKS.md, 2026-12-04, afternoon).
//! What the process holds does not grow with the run (heaptrack: heap in use between rolls
//! 26.6–27.0 MB from the second tenth of a 4,000-request run to the last); what the resident
//! set still gains, about 2 MB per million events at 256 streams (+2.2 MB over the last 0.95
//! million events of one run, +4.9 MB over the last 2.85 million of a longer one), is the
//! arenas' fragmentation.

/// The threshold the recorder keeps: glibc's own default.
pub const MMAP_THRESHOLD: usize = 128 * 1024;

/// Hold glibc's mmap threshold at [`MMAP_THRESHOLD`] for the rest of the process (no effect
/// with another C library, whose allocator has no such threshold to fix).
pub fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt(3) takes two integers and changes only the allocator's parameters. It
    // fails only for an unknown parameter or an out-of-range value, neither of which this is.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int);
    }
}
