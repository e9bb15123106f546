//! Tells the tests whether the project's shared fixtures (`../shared/fixtures`, beside the
//! checkout) exist: the tests that read them are `#[ignore]`d with the reason when they do not,
//! so a run without them reports them as ignored, not as passed. The cfg is `shared_fixtures`.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(shared_fixtures)");
    println!("cargo::rerun-if-changed=build.rs");
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let fixtures = Path::new(&dir).join("../shared/fixtures");
    if fixtures.is_dir() {
        println!("cargo::rustc-cfg=shared_fixtures");
        // Removed later: the path goes missing, the script runs again and the tests are ignored.
        println!("cargo::rerun-if-changed={}", fixtures.display());
    }
    // Absent: added later, `touch build.rs` (or a clean build) lets the tests run.
}
