//! The artifact reader on arbitrary table files: `open_table` and reading every batch of a
//! file give an error or rows, never a panic or an abort. The input is written as the
//! requests, events or scrapes table (first byte) of an artifact folder, the others copied
//! from the seed corpus shape when present; `validate` of the folder must not panic either.
#![no_main]

use anvil::artifact::{Table, open_table};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    let table = Table::ALL[usize::from(which) % Table::ALL.len()];
    let dir = tempfile::tempdir().expect("temporary folder");
    let path = dir.path().join(table.file_name());
    std::fs::write(&path, bytes).expect("writing the input");
    if let Ok(opened) = open_table(&path)
        && let Ok(reader) = opened.reader()
    {
        for batch in reader {
            if batch.is_err() {
                break;
            }
        }
    }
    let _ = anvil::artifact::validate(dir.path());
});
