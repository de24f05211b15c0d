//! The document loaders (workload manifest, run plan, run.json) on arbitrary text: an error
//! or a document, never a panic. A run.json that parses is also checked.
#![no_main]

use std::path::Path;

use anvil::artifact::RunJson;
use anvil::manifest::Document;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = Document::from_str(text, "fuzz.json");
    if let Ok(run) = RunJson::parse(text, Path::new("run.json")) {
        let _ = run.check(Path::new("run.json"));
    }
    let _ = anvil::json::parse_strict(text);
});
