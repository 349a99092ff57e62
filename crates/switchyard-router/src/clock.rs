//! Wall-aligned time for routing: hotspot windows, time slices and event stamps.

/// The shared wall-aligned clock, under the name the router's API has always used.
pub type RouterClock = switchyard_core::WallClock;
