//! Sweeps and recommendations: knob spaces and legality (`space`), the memory model
//! (`memory`), the noise-aware search (`search`), replay of recorded studies (`replay`) and
//! recommendations with evidence (`recommend`). Pure where it can be: the search runs against a
//! `Runner`, a real trial launcher or a recorded table.

pub mod memory;
pub mod recommend;
pub mod replay;
pub mod search;
pub mod space;
pub mod study;
