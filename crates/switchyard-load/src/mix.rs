//! Weighted mixes given on the command line as `name=share,name=share` (or `name:share`):
//! priority classes and client retry behaviours are both drawn per request from one.

use crate::LoadError;

/// Shares must add up to 1 within this tolerance, so a typo is not silently renormalised.
const SHARE_SUM_TOLERANCE: f64 = 0.011;

/// A discrete distribution over a few options, drawn with one uniform number.
#[derive(Clone, Debug, PartialEq)]
pub struct WeightedMix<T> {
    options: Vec<(T, f64)>,
}

impl<T> WeightedMix<T> {
    /// Parses `a=0.2,b=0.8`; each name goes through `parse_option`. Shares are positive and
    /// add up to 1; a name may appear only once.
    pub fn parse(
        spec: &str,
        what: &str,
        parse_option: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Self, LoadError>
    where
        T: PartialEq,
    {
        let invalid =
            |reason: String| LoadError::InvalidConfig(format!("{what} {spec:?}: {reason}"));
        let mut options: Vec<(T, f64)> = Vec::new();
        for part in spec
            .split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
        {
            let (name, share) = part
                .split_once(['=', ':'])
                .ok_or_else(|| invalid(format!("expected name=share, got {part:?}")))?;
            let option = parse_option(name.trim()).map_err(&invalid)?;
            let share: f64 = share
                .trim()
                .parse()
                .map_err(|_| invalid(format!("share {share:?} is not a number")))?;
            if !share.is_finite() || share <= 0.0 {
                return Err(invalid(format!("share of {name:?} must be positive")));
            }
            if options.iter().any(|(known, _)| *known == option) {
                return Err(invalid(format!("{name:?} appears twice")));
            }
            options.push((option, share));
        }
        if options.is_empty() {
            return Err(invalid("no option given".to_owned()));
        }
        let total: f64 = options.iter().map(|(_, share)| share).sum();
        if (total - 1.0).abs() > SHARE_SUM_TOLERANCE {
            return Err(invalid(format!("shares add up to {total}, not 1")));
        }
        Ok(Self { options })
    }

    /// A mix that always yields `option`.
    pub fn only(option: T) -> Self {
        Self {
            options: vec![(option, 1.0)],
        }
    }

    /// The option covering `uniform` (in `[0, 1)`) on the cumulative share line.
    pub fn pick(&self, uniform: f64) -> &T {
        let total: f64 = self.options.iter().map(|(_, share)| share).sum();
        let mut remaining = uniform * total;
        for (option, share) in &self.options {
            if remaining < *share {
                return option;
            }
            remaining -= share;
        }
        // Rounding can leave a sliver past the last share; it belongs to the last option.
        &self.options[self.options.len() - 1].0
    }

    pub fn options(&self) -> impl Iterator<Item = &(T, f64)> {
        self.options.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letters(spec: &str) -> Result<WeightedMix<char>, LoadError> {
        WeightedMix::parse(spec, "mix", |name| match name {
            "a" | "b" | "c" => Ok(name.chars().next().unwrap_or('?')),
            other => Err(format!("unknown {other:?}")),
        })
    }

    #[test]
    fn parses_both_separators_and_picks_by_cumulative_share() {
        let mix = letters("a=0.2, b:0.5,c=0.3").unwrap();
        assert_eq!(*mix.pick(0.0), 'a');
        assert_eq!(*mix.pick(0.19), 'a');
        assert_eq!(*mix.pick(0.21), 'b');
        assert_eq!(*mix.pick(0.69), 'b');
        assert_eq!(*mix.pick(0.71), 'c');
        assert_eq!(*mix.pick(0.999_999), 'c');
    }

    #[test]
    fn draws_follow_the_shares() {
        let mix = letters("a=0.2,b=0.5,c=0.3").unwrap();
        let mut counts = [0u32; 3];
        for step in 0..10_000 {
            let uniform = (f64::from(step) + 0.5) / 10_000.0;
            counts[(*mix.pick(uniform) as u8 - b'a') as usize] += 1;
        }
        assert_eq!(counts, [2_000, 5_000, 3_000]);
    }

    #[test]
    fn rejects_bad_specs() {
        for spec in [
            "",
            "a",
            "a=x",
            "a=0",
            "a=-1",
            "d=1",
            "a=0.5,a=0.5",
            "a=0.5",
            "a=0.7,b=0.7",
        ] {
            assert!(letters(spec).is_err(), "{spec:?} should be refused");
        }
        assert!(letters("a=1").is_ok());
    }
}
