//! Which colour each arm gets: its index in one stable order of arms, so an arm keeps its
//! colour on every chart of a report.

/// Arm names in a stable order (plan order, then first seen in artifacts) for colours.
#[derive(Debug, Clone, Default)]
pub struct Palette {
    arms: Vec<String>,
}

impl Palette {
    /// Exactly these arms, in this order: one comparison's colours (a comparison has at
    /// most as many arms as the palette has colours in practice, so none repeats).
    pub fn of(arms: &[String]) -> Self {
        let mut palette = Self::default();
        for arm in arms {
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
