//! The capture SSE framer on arbitrary bytes split at arbitrary points: it never panics, and
//! the events it frames do not depend on how the body was split.
#![no_main]

use anvil::capture::sse::Framer;
use libfuzzer_sys::fuzz_target;

fn frame(parts: &[&[u8]]) -> Vec<(Option<String>, Vec<u8>)> {
    let mut framer = Framer::new();
    let mut out = Vec::new();
    for part in parts {
        framer.push(part);
        while let Some(event) = framer.next_event::<()>() {
            if let Ok(event) = event {
                out.push((event.event.map(String::from), event.data.into_vec()));
            }
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    // The first byte chooses the split points: every (seed % 7 + 1) bytes.
    let Some((&seed, body)) = data.split_first() else {
        return;
    };
    let step = usize::from(seed % 7) + 1;
    let whole = frame(&[body]);
    let pieces: Vec<&[u8]> = body.chunks(step).collect();
    assert_eq!(whole, frame(&pieces), "framing depends on the split");
});
