//! Secrets out of everything an artifact holds: the API key's value (and any other secret
//! the capture was given) replaced by [`REDACTED`] wherever it appears, whatever the server
//! sends back (a 401 body that quotes the `Authorization` header, a stream that echoes it, a
//! `--set` value that repeats it).
//!
//! Applied by the writer thread (never the hot path) to event data and names, error texts,
//! scrape labels, and by the capture to `run.json`'s configuration and status reason.

use std::borrow::Cow;

/// What a secret is replaced by.
pub const REDACTED: &str = "<redacted>";

/// Secrets shorter than this are not searched for: a one- or two-character "key" would blank
/// out ordinary text and protects nothing.
const MIN_SECRET: usize = 4;

/// The secrets of one run.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<memchr::memmem::Finder<'static>>,
}

impl Redactor {
    /// A redactor for `secrets` (empty and very short ones are ignored).
    pub fn new<S: AsRef<str>>(secrets: &[S]) -> Self {
        let mut secrets: Vec<&str> = secrets
            .iter()
            .map(AsRef::as_ref)
            .filter(|s| s.len() >= MIN_SECRET)
            .collect();
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Self {
            secrets: secrets
                .into_iter()
                .map(|s| memchr::memmem::Finder::new(s.as_bytes()).into_owned())
                .collect(),
        }
    }

    /// Whether there is anything to redact.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    /// `bytes` with every secret replaced.
    pub fn bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        let mut out: Cow<'a, [u8]> = Cow::Borrowed(bytes);
        for finder in &self.secrets {
            if finder.find(&out).is_none() {
                continue;
            }
            let mut replaced = Vec::with_capacity(out.len());
            let mut rest: &[u8] = &out;
            while let Some(at) = finder.find(rest) {
                replaced.extend_from_slice(&rest[..at]);
                replaced.extend_from_slice(REDACTED.as_bytes());
                rest = &rest[at + finder.needle().len()..];
            }
            replaced.extend_from_slice(rest);
            out = Cow::Owned(replaced);
        }
        out
    }

    /// `text` with every secret replaced.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.bytes(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            // Replacing whole UTF-8 sequences with ASCII keeps the text UTF-8.
            Cow::Owned(b) => Cow::Owned(String::from_utf8_lossy(&b).into_owned()),
        }
    }

    /// Redact every string (and object key) of a JSON value in place.
    pub fn json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(text) => self.in_place(text),
            Value::Array(items) => items.iter_mut().for_each(|v| self.json(v)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (mut key, mut v) in entries {
                    self.in_place(&mut key);
                    self.json(&mut v);
                    map.insert(key, v);
                }
            }
            _ => {}
        }
    }

    /// Redact a string in place.
    pub fn in_place(&self, text: &mut String) {
        if let Cow::Owned(t) = self.text(text) {
            *text = t;
        }
    }
}

/// Whether a flag or configuration key names a secret: `api-key…`, `auth…`, or a name that
/// is or ends in `key`, `token`, `secret`, `password` or `passwd` (`-` and `_` alike, leading
/// dashes ignored).
pub fn is_secret_name(name: &str) -> bool {
    let name = name
        .trim_start_matches('-')
        .to_ascii_lowercase()
        .replace('_', "-");
    const WORDS: [&str; 5] = ["key", "token", "secret", "password", "passwd"];
    name.starts_with("api-key")
        || name.starts_with("auth")
        || WORDS
            .iter()
            .any(|w| name == *w || name.ends_with(&format!("-{w}")))
}

/// The command line with secrets removed: values of `--api-key`-style flags (any flag whose
/// name contains `key`, `token`, `secret` or `password`, as `--flag value` or
/// `--flag=value`) become `<redacted>`, as does any argument equal to or containing one of
/// `secrets`; credentials in URLs are stripped by [`redact_url`].
pub fn redact_args<S: AsRef<str>>(args: &[S], secrets: &[&str]) -> Vec<String> {
    const REDACTED: &str = "<redacted>";
    let secrets: Vec<&str> = secrets.iter().copied().filter(|s| !s.is_empty()).collect();
    let is_secret_flag = |flag: &str| flag.starts_with('-') && is_secret_name(flag);
    let mut out = Vec::with_capacity(args.len());
    let mut redact_next = false;
    for arg in args {
        let arg = arg.as_ref();
        if redact_next {
            redact_next = false;
            out.push(REDACTED.to_owned());
            continue;
        }
        if let Some((flag, _)) = arg.split_once('=')
            && is_secret_flag(flag)
        {
            out.push(format!("{flag}={REDACTED}"));
            continue;
        }
        if is_secret_flag(arg) {
            out.push(arg.to_owned());
            redact_next = true;
            continue;
        }
        let mut cleaned = redact_url(arg);
        if let Some(pos) = cleaned.to_ascii_lowercase().find("bearer ") {
            cleaned = format!("{}{REDACTED}", &cleaned[..pos + "bearer ".len()]);
        }
        for s in &secrets {
            if cleaned.contains(s) {
                cleaned = cleaned.replace(s, REDACTED);
            }
        }
        out.push(cleaned);
    }
    out
}

/// `url` without `user:password@` credentials (`https://u:p@h/x` → `https://<redacted>@h/x`).
pub fn redact_url(url: &str) -> String {
    if let Some(scheme_end) = url.find("://") {
        let rest = &url[scheme_end + 3..];
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            return format!("{}<redacted>@{}", &url[..scheme_end + 3], &rest[at + 1..]);
        }
    }
    url.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_occurrence_is_replaced_and_other_text_kept() {
        let r = Redactor::new(&["sk-secret-123"]);
        assert_eq!(
            r.text("401: bad key Bearer sk-secret-123 (sk-secret-123)"),
            "401: bad key Bearer <redacted> (<redacted>)"
        );
        assert!(matches!(r.text("nothing here"), Cow::Borrowed(_)));
        assert_eq!(&*r.bytes(b"\xffsk-secret-123\xfe"), b"\xff<redacted>\xfe");
    }

    #[test]
    fn short_or_empty_secrets_are_ignored_and_the_longest_wins() {
        assert!(Redactor::new(&["", "ab"]).is_empty());
        let r = Redactor::new(&["abcd", "abcdefgh"]);
        assert_eq!(r.text("xabcdefghx abcd"), "x<redacted>x <redacted>");
    }
}
