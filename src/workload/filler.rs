//! The filler text every prompt body and shared block is made of: natural-looking English
//! sentences from fixed word lists and templates, driven by SplitMix64 so that the text for
//! a seed is fixed by this code forever (prompts must stay comparable across releases). The
//! first `n + 1` words of a stream extend its first `n`, so a prompt's token count grows with
//! its size in words and calibration can search it.

/// SplitMix64: a tiny generator whose output is fixed by this code forever, unlike library
/// generators that may change between versions (prompts must stay comparable across releases).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, list: &[&'a str]) -> &'a str {
        list[self.below(list.len())]
    }
}

#[rustfmt::skip]
const ADJECTIVES: &[&str] = &[
    "quiet", "narrow", "ancient", "bright", "careful", "distant", "early", "gentle", "heavy",
    "hidden", "large", "little", "local", "modern", "northern", "old", "open", "patient", "plain",
    "private", "public", "quick", "rare", "rough", "simple", "small", "steady", "strange", "sudden",
    "tall", "thin", "warm", "wide", "wooden", "young", "busy", "cold", "dry", "empty", "fresh",
    "golden", "green", "honest", "loud", "pale", "silver", "soft", "southern", "stone",
];

#[rustfmt::skip]
const NOUNS: &[&str] = &[
    "river", "market", "engine", "garden", "harbour", "library", "village", "bridge", "station",
    "teacher", "farmer", "painter", "engineer", "merchant", "traveller", "window", "lantern",
    "valley", "mountain", "forest", "island", "road", "tower", "kitchen", "workshop", "letter",
    "map", "clock", "ship", "train", "field", "orchard", "council", "festival", "storm", "season",
    "museum", "school", "harvest", "castle", "shadow", "signal", "ledger", "compass", "journey",
    "meadow", "quarry", "canal", "mill", "lighthouse", "courtyard", "archive", "caravan",
    "observatory", "village square", "ferry", "bakery", "notebook", "instrument", "cathedral",
];

#[rustfmt::skip]
const VERBS: &[&str] = &[
    "follows", "carries", "watches", "crosses", "reaches", "builds", "repairs", "visits",
    "describes", "measures", "guards", "shelters", "records", "gathers", "answers", "remembers",
    "studies", "passes", "finds", "shapes", "supports", "changes", "protects", "welcomes",
    "explains", "surrounds", "connects", "overlooks", "replaces", "collects", "mentions",
    "imagines", "considers", "resembles", "inspects", "borrows", "paints", "counts", "opens",
];

#[rustfmt::skip]
const ADVERBS: &[&str] = &[
    "slowly", "quietly", "often", "rarely", "suddenly", "carefully", "gradually", "eventually",
    "happily", "patiently", "briefly", "openly", "politely", "steadily", "gently", "clearly",
    "usually", "seldom", "finally", "early",
];

#[rustfmt::skip]
const PREPOSITIONS: &[&str] = &[
    "near", "beyond", "behind", "beside", "above", "below", "across", "along", "inside", "outside",
    "around", "under", "past", "toward", "between the hills and",
];

#[rustfmt::skip]
const NUMBERS: &[&str] = &[
    "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve", "twenty",
];

#[rustfmt::skip]
const PLURAL_NOUNS: &[&str] = &[
    "stories", "lamps", "boats", "songs", "windows", "letters", "maps", "bells", "paths", "gardens",
    "ideas", "voices", "reports", "questions", "bridges", "visitors", "seasons",
];

/// One slot of a sentence template.
#[derive(Clone, Copy)]
enum Slot {
    Lit(&'static str),
    Adj,
    Noun,
    Verb,
    Adv,
    Prep,
    Num,
    Plural,
}

use Slot::*;

/// Sentence templates; a trailing comma is part of the literal word before it.
#[rustfmt::skip]
const TEMPLATES: &[&[Slot]] = &[
    &[Lit("The"), Adj, Noun, Verb, Lit("the"), Noun, Prep, Lit("the"), Adj, Noun],
    &[Adv, Lit("the"), Noun, Verb, Lit("every"), Adj, Noun],
    &[Lit("In"), Lit("the"), Adj, Noun, Lit("each"), Noun, Verb, Lit("the"), Noun, Lit("and"), Lit("the"), Noun],
    &[Lit("Nobody"), Lit("expected"), Lit("that"), Lit("the"), Noun, Prep, Lit("the"), Noun, Lit("would"), Lit("keep"), Num, Adj, Plural],
    &[Lit("Every"), Lit("morning"), Lit("the"), Adj, Noun, Adv, Verb, Lit("the"), Noun],
    &[Lit("According"), Lit("to"), Lit("the"), Noun, Lit("the"), Noun, Verb, Num, Plural, Prep, Lit("the"), Noun],
];

/// The first `units` words of the filler stream seeded by `seed`. Sentences end with a full
/// stop; paragraphs of four to eight sentences are separated by a blank line. If `units` ends
/// mid-sentence, the cut sentence still gets its full stop, so `n + 1` units only ever add a word.
pub(crate) fn filler(seed: u64, units: u32) -> String {
    let mut rng = SplitMix64(seed);
    let mut out = String::with_capacity(units as usize * 8);
    let mut left = units;
    let mut sentences_in_paragraph = 0;
    let mut paragraph_len = 4 + rng.below(5);
    let mut words: Vec<&str> = Vec::with_capacity(16);
    while left > 0 {
        let template = TEMPLATES[rng.below(TEMPLATES.len())];
        words.clear();
        for slot in template {
            words.push(match *slot {
                Lit(w) => w,
                Adj => rng.pick(ADJECTIVES),
                Noun => rng.pick(NOUNS),
                Verb => rng.pick(VERBS),
                Adv => rng.pick(ADVERBS),
                Prep => rng.pick(PREPOSITIONS),
                Num => rng.pick(NUMBERS),
                Plural => rng.pick(PLURAL_NOUNS),
            });
        }
        // A multi-word entry ("village square") counts as one unit: units count choices.
        let take = (words.len() as u32).min(left) as usize;
        left -= take as u32;
        if !out.is_empty() {
            if sentences_in_paragraph == paragraph_len {
                out.push_str("\n\n");
                sentences_in_paragraph = 0;
                paragraph_len = 4 + rng.below(5);
            } else {
                out.push(' ');
            }
        }
        for (i, w) in words[..take].iter().enumerate() {
            if i == 0 {
                let mut c = w.chars();
                if let Some(first) = c.next() {
                    out.extend(first.to_uppercase());
                    out.push_str(c.as_str());
                }
            } else {
                out.push(' ');
                out.push_str(w);
            }
            if i == 0 && take > 1 && matches!(template[0], Adv) {
                out.push(',');
            }
        }
        out.push('.');
        sentences_in_paragraph += 1;
    }
    out
}
