//! Panic payloads as text, for the places that contain a library's panic (the Parquet decoder
//! on a damaged page) and report it as an error, and for the edge's last-resort message.

/// The message of a panic payload (`&str` or `String`; anything else is "a panic").
pub fn text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned())
}
