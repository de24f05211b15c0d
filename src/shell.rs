//! Command lines as a POSIX shell reads them: the one quoting of every command anvil prints
//! (the recorder's command in `campaign plan`, the journal's notices, the report's gap
//! commands), so that any of them can be pasted into a shell as shown.

use std::borrow::Cow;

/// `word` as one shell word: as it is when every character is safe unquoted (ASCII letters,
/// digits and `-_./:=@`), else single-quoted (a `'` inside written `'\''`); empty is `''`.
pub fn quote(word: &str) -> Cow<'_, str> {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@".contains(c))
    {
        Cow::Borrowed(word)
    } else {
        Cow::Owned(format!("'{}'", word.replace('\'', r"'\''")))
    }
}

/// The words as one command line, each quoted as [`quote`] does.
pub fn join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| quote(w.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_a_shell_would_change_them() {
        assert_eq!(
            quote("sample-data/campaign.json"),
            "sample-data/campaign.json"
        );
        assert_eq!(quote("spec_depth=12"), "spec_depth=12");
        assert_eq!(quote("Mamba lazy96"), "'Mamba lazy96'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
        assert_eq!(
            join(&["anvil-capture", "--arm", "two replicas", "--set", "a=$HOME"]),
            "anvil-capture --arm 'two replicas' --set 'a=$HOME'"
        );
    }
}
