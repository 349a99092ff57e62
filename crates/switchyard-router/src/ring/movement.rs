//! How much of the key space changed owner between two rings: the exact share of the hash
//! space (so of uniformly hashed keys) that a membership change moved.

use super::Ring;

/// Share (0.0..=1.0) of the 64-bit hash space whose owning worker name differs.
///
/// Owners are constant between consecutive vnode positions of the two rings combined, so
/// one sweep over the merged positions measures every moved interval exactly.
pub(crate) fn moved_share(old: &Ring, new: &Ring) -> f64 {
    match (old.is_empty(), new.is_empty()) {
        (true, true) => return 0.0,
        (true, false) | (false, true) => return 1.0,
        (false, false) => {}
    }
    let mut bounds: Vec<u64> = old
        .points
        .iter()
        .chain(&new.points)
        .map(|p| p.position)
        .collect();
    bounds.sort_unstable();
    bounds.dedup();
    let owner_name = |ring: &Ring, hash: u64| {
        ring.owner(hash)
            .and_then(|m| ring.member(m))
            .map(|m| m.name.clone())
    };
    let mut moved: u128 = 0;
    // Hashes in (previous bound, bound] share the owners of `bound`; the first bound also
    // owns the wrap-around interval past the last bound.
    let mut previous: Option<u64> = None;
    for &bound in &bounds {
        let width: u128 = match previous {
            Some(before) => u128::from(bound - before),
            None => {
                let last = bounds.last().copied().unwrap_or(bound);
                (1u128 << 64) - u128::from(last) + u128::from(bound)
            }
        };
        if owner_name(old, bound) != owner_name(new, bound) {
            moved += width;
        }
        previous = Some(bound);
    }
    moved as f64 / (1u128 << 64) as f64
}
