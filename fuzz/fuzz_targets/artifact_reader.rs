//! The artifact reader on arbitrary table files: `open_table`, decoding every page
//! (`read_pages`) and validating the folder give an error or rows, never a panic or an
//! abort. The input is written as the requests, events or scrapes table (first byte) of an
//! otherwise empty artifact folder.
//!
//! anvil contains the Parquet decoder's own panics at its reader boundary (a damaged data page
//! is an error naming the file), so the panic hook libfuzzer-sys installs, which aborts on any
//! panic even when it is caught, is replaced by one that only prints: a panic that escapes
//! anvil's API still ends the run, through libfuzzer-sys's catch around the target.
#![no_main]

use anvil::artifact::{Table, open_table, read_pages};
use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        std::panic::set_hook(Box::new(|info| eprintln!("contained? {info}")));
    },
    |data: &[u8]| {
        let Some((&which, bytes)) = data.split_first() else {
            return;
        };
        let table = Table::ALL[usize::from(which) % Table::ALL.len()];
        let dir = tempfile::tempdir().expect("temporary folder");
        let path = dir.path().join(table.file_name());
        std::fs::write(&path, bytes).expect("writing the input");
        let _ = open_table(&path);
        let _ = read_pages(&path);
        let _ = anvil::artifact::validate_deep(dir.path());
    }
);
