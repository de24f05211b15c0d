//! Which colour each arm gets: its index in one order of the campaign's arms (plan order,
//! then first seen), assigned once per report, so an arm keeps its colour on every chart and
//! two arms of one chart never share one (up to the palette's twenty colours).

/// Arm names in a stable order (plan order, then first seen in artifacts) for colours.
#[derive(Debug, Clone, Default)]
pub struct Palette {
    arms: Vec<String>,
}

impl Palette {
    /// The campaign's arms in `ordered` order (plan order, then the rest): one palette for
    /// the whole report.
    pub fn campaign<'a>(ordered: impl IntoIterator<Item = &'a str>) -> Self {
        let mut palette = Self::default();
        for arm in ordered {
            palette.add(arm);
        }
        palette
    }

    fn add(&mut self, arm: &str) {
        if !self.arms.iter().any(|a| a == arm) {
            self.arms.push(arm.to_owned());
        }
    }

    /// The arm's palette index (arms not seen before get the next free index).
    pub fn index(&self, arm: &str) -> usize {
        self.arms
            .iter()
            .position(|a| a == arm)
            .unwrap_or(self.arms.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample campaign's eighteen arms each get a colour of their own.
    #[test]
    fn every_arm_of_a_campaign_has_its_own_colour() {
        let arms: Vec<String> = (0..18).map(|i| format!("arm {i}")).collect();
        let palette = Palette::campaign(arms.iter().map(String::as_str));
        let mut colours: Vec<String> = arms
            .iter()
            .map(|a| super::super::common::colour_hex(palette.index(a)))
            .collect();
        assert!(palette.index("arm 17") < super::super::common::PALETTE.len());
        colours.sort();
        colours.dedup();
        assert_eq!(colours.len(), 18);
        // The same arm, the same colour, whatever chart asks.
        assert_eq!(palette.index("arm 3"), 3);
    }
}
