//! Sweeps and recommendations: knob spaces and legality (`space`), the memory model
//! (`memory`), the noise-aware search (`search`), replay of recorded studies (`replay`) and
//! recommendations with evidence (`recommend`). Pure where it can be: the search runs against a
//! `Runner`, a real trial launcher or a recorded table.

// Decision code as short steps (issue 44): no production function here over the
// threshold in clippy.toml (tests are exempt).
#![cfg_attr(not(test), deny(clippy::too_many_lines))]

pub mod layout;
pub mod memory;
pub mod recommend;
pub mod replay;
pub mod search;
pub mod space;
pub mod study;
