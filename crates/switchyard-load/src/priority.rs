//! Priority classes the load tool can ask for (`x-switchyard-priority`), and the mix of them.

use serde::Serialize;

use crate::LoadError;
use crate::mix::WeightedMix;

/// A priority class as the gateway spells it; P0 is the most urgent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum PriorityClass {
    P0,
    P1,
    P2,
}

impl PriorityClass {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::P0 => "P0",
            Self::P1 => "P1",
            Self::P2 => "P2",
        }
    }

    fn parse(name: &str) -> Result<Self, String> {
        match name.to_ascii_uppercase().as_str() {
            "P0" => Ok(Self::P0),
            "P1" => Ok(Self::P1),
            "P2" => Ok(Self::P2),
            _ => Err(format!("unknown priority class {name:?} (P0, P1, P2)")),
        }
    }
}

/// `--priority-mix P0=0.2,P1=0.5,P2=0.3`: each request draws its class from these shares.
pub type PriorityMix = WeightedMix<PriorityClass>;

pub fn parse_priority_mix(spec: &str) -> Result<PriorityMix, LoadError> {
    WeightedMix::parse(spec, "priority mix", PriorityClass::parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_classes_case_insensitively() {
        let mix = parse_priority_mix("p0=0.2,P1=0.5,P2=0.3").unwrap();
        let classes: Vec<(PriorityClass, f64)> = mix.options().copied().collect();
        assert_eq!(
            classes,
            [
                (PriorityClass::P0, 0.2),
                (PriorityClass::P1, 0.5),
                (PriorityClass::P2, 0.3)
            ]
        );
        assert_eq!(PriorityClass::P2.as_str(), "P2");
    }

    #[test]
    fn rejects_unknown_classes() {
        assert!(parse_priority_mix("P3=1").is_err());
        assert!(parse_priority_mix("high=1").is_err());
    }
}
