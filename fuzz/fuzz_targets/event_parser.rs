//! The event parser the artifact writer runs on every `data:` payload: never panics, and a
//! payload that is not valid UTF-8 is flagged.
#![no_main]

use anvil::artifact::parse_event;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let named = parse_event(Some("response.output_text.delta"), data);
    let plain = parse_event(None, data);
    if std::str::from_utf8(data).is_err() {
        assert!(plain.parse_error.is_some() && named.parse_error.is_some());
    }
});
