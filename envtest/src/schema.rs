//! Placeholder module; its owner overwrites it.
