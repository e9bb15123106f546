use super::LIBRARY_NAMES;
use super::abi::*;
use super::decode::*;
use super::library::*;
use crate::telemetry::types::*;
use std::ffi::OsStr;
use std::time::Instant;

#[test]
fn version_words_decode_both_schemes() {
    let y = LibVersion::from_words([24, 6, 1, 0]);
    assert_eq!(y.abi_major, 24);
    assert_eq!(y.year_major, Some(6));
    assert_eq!(y.to_string(), "24.6.1.0");
    let n = LibVersion::from_words([26, 5, 0, 0xdead]);
    assert_eq!(
        (n.abi_major, n.year_major, n.minor, n.release),
        (26, None, 5, 0)
    );
    assert_eq!(n.to_string(), "26.5.0");
}

#[test]
fn struct_calls_only_for_encoded_layouts() {
    let v = |w| LibVersion::from_words(w).struct_calls();
    assert!(v([26, 1, 0, 0]).process_list && v([26, 1, 0, 0]).violation);
    assert!(v([25, 2, 0, 0]).power_info && !v([25, 2, 0, 0]).process_list);
    assert!(v([24, 6, 1, 0]).process_list && !v([24, 6, 1, 0]).violation);
    assert!(!v([24, 7, 0, 0]).process_list && v([24, 7, 0, 0]).power_info);
    for unknown in [
        [27, 0, 0, 0],
        [99, 0, 0, 0],
        [24, 5, 0, 0],
        [23, 1, 0, 0],
        [0; 4],
    ] {
        assert!(!v(unknown).any(), "{unknown:?}");
    }
}

#[test]
fn candidates_cover_every_major_and_rocm_dirs() {
    let c = candidate_paths(Some(OsStr::new("/opt/rocm-7.1.0")));
    let s: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
    assert_eq!(s[0], "libamd_smi.so.27");
    assert_eq!(s[1], "/opt/rocm-7.1.0/lib/libamd_smi.so.27");
    for want in [
        "/opt/rocm/lib/libamd_smi.so.26",
        "/opt/rocm/lib64/libamd_smi.so.25",
        "libamd_smi.so.24",
        "/opt/rocm/lib/libamd_smi.so",
    ] {
        assert!(s.iter().any(|p| p == want), "{want} missing from {s:?}");
    }
    // ROCM_PATH=/opt/rocm is not tried twice.
    let d = candidate_paths(Some(OsStr::new("/opt/rocm")));
    assert_eq!(d.len(), LIBRARY_NAMES.len() * 3);
}

#[test]
fn bdf_decodes_like_the_c_bitfields() {
    let v = (0x0001u64 << 16) | (0x0c << 8) | (0x02 << 3) | 0x1;
    assert_eq!(Bdf::from_u64(v).to_string(), "0001:0c:02.1");
}

#[test]
fn power_prefers_current_then_average_and_skips_sentinels() {
    assert_eq!(
        pick_power(612, u32::MAX, None),
        Some((612.0, PowerKind::Instant))
    );
    assert_eq!(
        pick_power(u32::MAX, 300, None),
        Some((300.0, PowerKind::Average))
    );
    assert_eq!(
        pick_power(u32::MAX, u32::MAX, Some(450)),
        Some((450.0, PowerKind::Instant))
    );
    assert_eq!(pick_power(0, u32::MAX, Some(u64::MAX)), None);
}

#[test]
fn energy_delta_uses_library_timestamps() {
    let t = Instant::now();
    let a = EnergyReading {
        ticks: 0,
        resolution_uj: 16.0,
        timestamp_ns: 1_000_000_000,
        at: t,
    };
    let b = EnergyReading {
        ticks: 38_250_000,
        resolution_uj: 16.0,
        timestamp_ns: 2_000_000_000,
        at: t,
    };
    assert_eq!(energy_power_w(&a, &b), Some(612.0));
    assert_eq!(energy_power_w(&b, &a), None, "counter went backwards");
}

#[test]
fn violations_name_active_flags_only() {
    let mut v = ViolationHead {
        reference_timestamp: 0,
        violation_timestamp: 0,
        acc_counter: 0,
        acc_prochot_thrm: 0,
        acc_ppt_pwr: 0,
        acc_socket_thrm: 0,
        acc_vr_thrm: 0,
        acc_hbm_thrm: 0,
        acc_gfx_clk_below_host_limit: 0,
        per_prochot_thrm: 0,
        per_ppt_pwr: 0,
        per_socket_thrm: 0,
        per_vr_thrm: 0,
        per_hbm_thrm: 0,
        per_gfx_clk_below_host_limit: 0,
        active_prochot_thrm: u8::MAX,
        active_ppt_pwr: u8::MAX,
        active_socket_thrm: u8::MAX,
        active_vr_thrm: u8::MAX,
        active_hbm_thrm: u8::MAX,
        active_gfx_clk_below_host_limit: u8::MAX,
    };
    assert_eq!(violation_names(&v), None);
    v.active_ppt_pwr = 1;
    v.active_socket_thrm = 0;
    assert_eq!(violation_names(&v), Some(vec!["ppt-power".to_string()]));
}

#[test]
fn c_strings_stop_at_nul() {
    assert_eq!(c_string(b"SPX\0junk"), Some("SPX".into()));
    assert_eq!(c_string(b"\0\0"), None);
    assert_eq!(status_name(34), "DRIVER_NOT_LOADED");
}
