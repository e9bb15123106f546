//! What a stored trial's figures are evidence of (a leaf: the trials and comparison views both
//! read it).

use crate::store::TrialRow;
use std::collections::HashMap;

/// What a stored trial's figures are evidence of: as its summary says, else (trials stored
/// before it was kept) as its profile declares — a CPU stand-in's, or a GPU measurement with
/// its profile.
pub fn basis_of(row: &TrialRow) -> crate::domain::evidence::Basis {
    basis_with(row, &mut HashMap::new())
}

/// [`basis_of`], profiles looked up once in `stand_ins`.
pub(super) fn basis_with(
    row: &TrialRow,
    stand_ins: &mut HashMap<String, bool>,
) -> crate::domain::evidence::Basis {
    use crate::domain::evidence::Basis;
    if let Some(b) = row.stored_basis() {
        return b;
    }
    let profile = row.profile.clone().unwrap_or_default();
    let stand_in = *stand_ins.entry(profile.clone()).or_insert_with(|| {
        crate::run::profile::find(&profile, crate::run::profile::user_dir().as_deref())
            .is_ok_and(|p| p.capabilities.stand_in)
    });
    if stand_in {
        Basis::Proxy { profile }
    } else {
        Basis::Measured { profile, gpu: None }
    }
}
