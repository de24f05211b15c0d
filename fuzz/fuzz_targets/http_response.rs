//! The recorder's HTTP/1.1 response reader (`capture/hotpath/wire.rs`: the head parser and
//! the body's chunked, length or close framing) on arbitrary bytes split at arbitrary points:
//! it never panics, and what it reads does not depend on how the socket split the bytes.
#![no_main]

use anvil::capture::hotpath::read_response;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte chooses the split points: every (seed % 13 + 1) bytes.
    let Some((&seed, body)) = data.split_first() else {
        return;
    };
    let step = usize::from(seed % 13) + 1;
    let whole = read_response(&[body]);
    let pieces: Vec<&[u8]> = body.chunks(step).collect();
    assert_eq!(whole, read_response(&pieces), "reading depends on the split");
});
