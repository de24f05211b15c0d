//! The simulator's deterministic tokenizer and chat template.
//!
//! Rule: each maximal run of letters/digits is split into pieces of at most 4 characters;
//! every other non-whitespace character is one token; a run of whitespace attaches to the
//! token that follows it (whitespace at the very end of the text is one token of its own).
//! So `" hello, world"` is `[" hell", "o", ",", " worl", "d"]`, and a generated word such as
//! `" cat"` is exactly one token.
//!
//! Chat template: every message costs 3 tokens (start, separator, end) + the tokens of its
//! role name + the tokens of its content; the JSON of the request's `tools` (when present)
//! is tokenized as one more block; the assistant prime adds 3 tokens. `/tokenize` with
//! `messages` and the chat endpoints' `usage.prompt_tokens` use this same function.

/// Special token ids of the template.
pub const MSG_START: u32 = 1;
pub const MSG_SEP: u32 = 2;
pub const MSG_END: u32 = 3;
pub const PRIME: [u32; 3] = [4, 5, 6];
/// Token ids of ordinary pieces fall in `[FIRST_ID, FIRST_ID + VOCAB)`.
const FIRST_ID: u32 = 100;
const VOCAB: u32 = 100_000;

/// Split `text` into token pieces (concatenating them gives `text` back).
pub fn pieces(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0; // start of the current piece (including leading whitespace)
    let mut it = text.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        if c.is_whitespace() {
            continue;
        }
        if c.is_alphanumeric() {
            let mut n = 1;
            let mut end = i + c.len_utf8();
            while let Some(&(j, d)) = it.peek() {
                if !d.is_alphanumeric() {
                    break;
                }
                if n == 4 {
                    out.push(&text[start..end]);
                    start = j;
                    n = 0;
                }
                n += 1;
                end = j + d.len_utf8();
                it.next();
            }
            out.push(&text[start..end]);
            start = end;
        } else {
            let end = i + c.len_utf8();
            out.push(&text[start..end]);
            start = end;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// Number of tokens in `text`.
pub fn count(text: &str) -> usize {
    pieces(text).len()
}

/// The id of one piece (FNV-1a of its bytes, folded into the vocabulary).
pub fn piece_id(piece: &str) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in piece.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    FIRST_ID + (h % VOCAB as u64) as u32
}

/// Token ids of plain text (no template).
pub fn encode(text: &str) -> Vec<u32> {
    pieces(text).into_iter().map(piece_id).collect()
}

/// One chat message as the template sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// Token ids of a chat prompt: the template applied to `messages` (and `tools` JSON).
pub fn encode_chat(messages: &[Message], tools_json: Option<&str>) -> Vec<u32> {
    let mut ids = Vec::new();
    for m in messages {
        ids.push(MSG_START);
        ids.extend(encode(&m.role));
        ids.push(MSG_SEP);
        ids.extend(encode(&m.content));
        ids.push(MSG_END);
    }
    if let Some(t) = tools_json {
        ids.extend(encode(t));
    }
    ids.extend(PRIME);
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_by_the_documented_rule() {
        assert_eq!(
            pieces(" hello, world"),
            vec![" hell", "o", ",", " worl", "d"]
        );
        assert_eq!(
            pieces("ANV-3f9a0c17be42"),
            vec!["ANV", "-", "3f9a", "0c17", "be42"]
        );
        assert_eq!(pieces("a  b\n"), vec!["a", "  b", "\n"]);
        assert_eq!(pieces(""), Vec::<&str>::new());
        assert_eq!(pieces("  "), vec!["  "]);
        assert_eq!(
            pieces("{\"k\":1}"),
            vec!["{", "\"", "k", "\"", ":", "1", "}"]
        );
        assert_eq!(pieces("héllo wörld").concat(), "héllo wörld");
        assert_eq!(count(" the cat sat"), 3);
    }

    #[test]
    fn template_overhead_is_documented() {
        let m = vec![Message {
            role: "user".into(),
            content: "hi you".into(),
        }];
        // 3 + "user"(1) + "hi you"(2) + prime 3
        assert_eq!(encode_chat(&m, None).len(), 9);
    }
}
