//! Money, as an estimate: what a turn's tokens would cost at the model's list price.
//!
//! Why an estimate, and why only for API keys: a plan (a subscription) is not billed per token,
//! so a dollar figure there is noise at best and alarm at worst; and even for an API key the
//! bill is the provider's, which may differ (discounts, long-context prices, batch). So a price
//! is shown as "≈ $0.42", only for sessions that use an API key (the CLI's key variable is set
//! in its environment) unless `[usage] money = "always"`, and the table below is versioned with
//! the release; `[usage.prices]` overrides or adds models.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Tokens;

/// US dollars per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Reading from the prompt cache (defaults to a tenth of `input`).
    #[serde(default)]
    pub cache_read: Option<f64>,
    /// Writing to the prompt cache (defaults to `input`).
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl Price {
    const fn list(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Price {
        Price {
            input,
            output,
            cache_read: Some(cache_read),
            cache_write: Some(cache_write),
        }
    }

    /// What `t` costs at this price, in dollars.
    pub fn cost(&self, t: &Tokens) -> f64 {
        let per = |n: u64, p: f64| n as f64 * p / 1_000_000.0;
        per(t.input, self.input)
            + per(t.output, self.output)
            + per(t.cache_read, self.cache_read.unwrap_or(self.input / 10.0))
            + per(t.cache_write, self.cache_write.unwrap_or(self.input))
    }
}

/// List prices as published by the providers when this release was made (standard tier,
/// short context), by model-name prefix; the longest matching prefix wins.
const LIST: &[(&str, Price)] = &[
    ("claude-opus-4-5", Price::list(5.0, 25.0, 0.5, 6.25)),
    ("claude-opus-4", Price::list(15.0, 75.0, 1.5, 18.75)),
    ("claude-sonnet-4", Price::list(3.0, 15.0, 0.3, 3.75)),
    ("claude-3-7-sonnet", Price::list(3.0, 15.0, 0.3, 3.75)),
    ("claude-haiku-4", Price::list(1.0, 5.0, 0.1, 1.25)),
    ("claude-3-5-haiku", Price::list(0.8, 4.0, 0.08, 1.0)),
    ("gpt-5", Price::list(1.25, 10.0, 0.125, 1.25)),
    ("gpt-5-mini", Price::list(0.25, 2.0, 0.025, 0.25)),
    ("gpt-5-nano", Price::list(0.05, 0.4, 0.005, 0.05)),
    ("gpt-4.1", Price::list(2.0, 8.0, 0.5, 2.0)),
    ("o3", Price::list(2.0, 8.0, 0.5, 2.0)),
    ("o4-mini", Price::list(1.1, 4.4, 0.275, 1.1)),
    ("gemini-2.5-pro", Price::list(1.25, 10.0, 0.31, 1.25)),
    ("gemini-2.5-flash", Price::list(0.3, 2.5, 0.075, 0.3)),
    ("gemini-2.5-flash-lite", Price::list(0.1, 0.4, 0.025, 0.1)),
    ("gemini-3-pro", Price::list(2.0, 12.0, 0.2, 2.0)),
];

/// When money is shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Money {
    /// For sessions that use an API key (the CLI's key variable is set for it).
    #[default]
    Api,
    /// For every session (a plan user who wants the list-price equivalent).
    Always,
    Never,
}

/// The price of `model`: `overrides` (`[usage.prices]`, by exact name or prefix) first, then the
/// list; `None` for a model nobody priced (then no money is shown rather than a guess).
pub fn price_of(model: &str, overrides: &BTreeMap<String, Price>) -> Option<Price> {
    let model = model.trim().to_ascii_lowercase();
    // A provider prefix ("anthropic/claude-…", "models/gemini-…") does not change the price.
    let model = model.rsplit('/').next().unwrap_or(&model).to_string();
    let best = |table: &mut dyn Iterator<Item = (&str, Price)>| {
        table
            .filter(|(prefix, _)| model.starts_with(&prefix.to_ascii_lowercase()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, p)| p)
    };
    best(&mut overrides.iter().map(|(k, p)| (k.as_str(), *p)))
        .or_else(|| best(&mut LIST.iter().map(|(k, p)| (*k, *p))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_wins_and_overrides_come_first() {
        let none = BTreeMap::new();
        let mini = price_of("gpt-5-mini-2025-08-07", &none).expect("priced");
        assert_eq!(mini.input, 0.25);
        assert_eq!(price_of("gpt-5-codex", &none).map(|p| p.input), Some(1.25));
        assert_eq!(
            price_of("anthropic/claude-sonnet-4-5-20250929", &none).map(|p| p.output),
            Some(15.0)
        );
        assert_eq!(price_of("mock-model", &none), None);
        let mut mine = BTreeMap::new();
        mine.insert(
            "mock".to_string(),
            Price {
                input: 2.0,
                output: 8.0,
                cache_read: None,
                cache_write: None,
            },
        );
        mine.insert("gpt-5".to_string(), Price::list(1.0, 1.0, 1.0, 1.0));
        assert_eq!(price_of("mock-model", &mine).map(|p| p.input), Some(2.0));
        // An override's shorter prefix still comes before the list's longer one.
        assert_eq!(price_of("gpt-5-mini", &mine).map(|p| p.input), Some(1.0));
    }

    #[test]
    fn a_cost_counts_each_kind_at_its_price() {
        let p = Price {
            input: 3.0,
            output: 15.0,
            cache_read: None,
            cache_write: None,
        };
        let t = Tokens {
            input: 1_000_000,
            output: 100_000,
            cache_read: 1_000_000,
            cache_write: 1_000_000,
        };
        // 3 + 1.5 + 0.3 (a tenth of input) + 3 (as input).
        assert!((p.cost(&t) - 7.8).abs() < 1e-9, "{}", p.cost(&t));
    }
}
