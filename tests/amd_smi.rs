#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The AMD SMI backend against a test double of `libamd_smi.so`
//! (`tests/amdsmi_mock/amdsmi_mock.c`, the hardware boundary), compiled here at test time and
//! loaded through the same dlopen path production uses.
//!
//! The mock reads `AMDSMI_MOCK_MAJOR`, `AMDSMI_MOCK_INIT_FAIL` and `AMDSMI_MOCK_CALL_LOG` at call
//! time. The environment is process-global, so every test here holds `SERIAL` for its whole run.

use primus_tune::telemetry::amd_smi::{AmdSmi, StructCalls};
use primus_tune::telemetry::{Backend, PowerKind, ProcessSample, TelemetryError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

const GIB: u64 = 1 << 30;

/// Calls whose out-parameter is a struct with a per-major layout.
const STRUCT_CALLS: &[&str] = &[
    "amdsmi_get_gpu_activity",
    "amdsmi_get_power_info",
    "amdsmi_get_power_cap_info",
    "amdsmi_get_clock_info",
    "amdsmi_get_violation_status",
    "amdsmi_get_gpu_asic_info",
    "amdsmi_get_gpu_kfd_info",
    "amdsmi_get_gpu_process_list",
];

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Set (`Some`) or remove (`None`) a variable the mock reads.
///
/// `set_var`/`remove_var` are `unsafe` in edition 2024 because another thread could be reading
/// the environment at the same time; the crate denies `unsafe_code`, so the allowance is scoped
/// to this one helper.
#[allow(unsafe_code)]
fn mock_env(key: &str, value: Option<&str>) {
    match value {
        // SAFETY: only called while holding `SERIAL`, which every test in this binary takes
        // first, so no other thread of this process reads or writes the environment meanwhile.
        Some(v) => unsafe { std::env::set_var(key, v) },
        // SAFETY: as above.
        None => unsafe { std::env::remove_var(key) },
    }
}

/// Compile the mock as `<dir>/libamd_smi.so.26`. `None` (with the reason on stderr) when there is
/// no C compiler.
fn build_mock(dir: &Path) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/amdsmi_mock/amdsmi_mock.c");
    let out = dir.join("libamd_smi.so.26");
    match Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
    {
        Ok(s) if s.success() => Some(out),
        Ok(s) => panic!("cc failed to build the AMD SMI mock ({s})"),
        Err(e) => {
            eprintln!("skipped: no C compiler to build the AMD SMI mock (`cc`: {e})");
            None
        }
    }
}

fn calls(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Load the mock reporting `major`, with a fresh call log.
fn load_major(lib: &Path, log: &Path, major: &str) -> AmdSmi {
    let _ = std::fs::remove_file(log);
    mock_env("AMDSMI_MOCK_MAJOR", Some(major));
    mock_env("AMDSMI_MOCK_CALL_LOG", Some(log.to_str().unwrap()));
    mock_env("AMDSMI_MOCK_INIT_FAIL", None);
    AmdSmi::load_from(lib).unwrap_or_else(|e| panic!("mock with major {major}: {e}"))
}

fn temps(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
}

fn python3_on_gpu0() -> Vec<ProcessSample> {
    vec![ProcessSample {
        pid: 4242,
        gpu: 0,
        vram_bytes: 80 * GIB,
        name: Some("python3".into()),
    }]
}

#[test]
fn mock_library_through_the_production_path() {
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    let Some(lib) = build_mock(dir.path()) else {
        return;
    };
    let log = dir.path().join("calls.log");

    // -- major 26: every struct layout encoded ----------------------------------------------
    let mut smi = load_major(&lib, &log, "26");
    assert_eq!(smi.lib_version().to_string(), "26.5.0");
    assert_eq!(smi.library_path(), lib.as_path());
    assert!(smi.notes().is_empty(), "{:?}", smi.notes());
    let all = StructCalls {
        activity: true,
        clock: true,
        power_info: true,
        power_cap: true,
        asic_info: true,
        violation: true,
        kfd_info: true,
        process_list: true,
    };
    assert_eq!(smi.struct_calls(), all);
    assert_eq!(smi.name(), "amd-smi");

    let gpus = smi.gpus().to_vec();
    assert_eq!(gpus.len(), 2);
    let g = &gpus[0];
    assert_eq!(g.index, 0);
    assert_eq!(g.backend, "amd-smi");
    assert_eq!(g.name, "AMD Instinct MI300X");
    assert_eq!(g.bus_id.as_deref(), Some("0000:0c:00.0"));
    assert_eq!(
        g.uuid.as_deref(),
        Some("3cff74a1-0000-1000-80e9-1e3a5b7c0c00")
    );
    assert_eq!(g.vram_total_bytes, Some(192 * GIB));
    assert_eq!(g.compute_units, Some(304));
    assert_eq!(g.physical_id, Some(0));
    assert_eq!(g.compute_partition.as_deref(), Some("SPX"));
    assert_eq!(g.memory_partition.as_deref(), Some("NPS1"));
    assert_eq!(g.partition_index, Some(0));
    assert_eq!(g.power_cap_w, Some(750.0));
    assert_eq!(g.kfd_gpu_id, Some(18421));
    assert_eq!(gpus[1].bus_id.as_deref(), Some("0000:22:00.0"));
    assert_eq!(gpus[1].physical_id, Some(1));
    assert_eq!(gpus[1].kfd_gpu_id, Some(48116));

    let samples = smi.sample().unwrap();
    assert_eq!(samples.len(), 2);
    for (i, s) in samples.iter().enumerate() {
        assert_eq!(s.gpu, i as u32);
        assert_eq!(s.util_pct, Some(87.0));
        assert_eq!(s.mem_util_pct, Some(41.0));
        assert_eq!(s.vram_used_bytes, Some(150 * GIB));
        assert_eq!(s.vram_total_bytes, Some(192 * GIB));
        assert_eq!(s.power_w, Some(612.0));
        assert_eq!(s.power_kind, Some(PowerKind::Instant));
        // No edge sensor on MI300X: absent, not 0.
        assert_eq!(s.temp_c, temps(&[("junction", 71.0), ("mem", 62.0)]));
        assert_eq!(s.sclk_mhz, Some(2100.0));
        assert_eq!(s.mclk_mhz, Some(1300.0));
        assert_eq!(s.throttle, Some(vec!["ppt-power".to_string()]));
    }
    assert_eq!(smi.processes().unwrap(), python3_on_gpu0());

    let log26 = calls(&log);
    assert_eq!(log26[0], "amdsmi_init");
    let version_at = log26
        .iter()
        .position(|c| c == "amdsmi_get_lib_version")
        .expect("version checked");
    let first_struct = log26
        .iter()
        .position(|c| STRUCT_CALLS.contains(&c.as_str()))
        .expect("struct calls made on 26");
    assert!(version_at < first_struct, "{log26:?}");
    drop(smi);
    assert_eq!(
        calls(&log).last().map(String::as_str),
        Some("amdsmi_shut_down")
    );

    // -- unknown major 99: scalar calls only ------------------------------------------------
    let mut smi = load_major(&lib, &log, "99");
    assert_eq!(smi.lib_version().to_string(), "99.5.0");
    assert_eq!(smi.struct_calls(), StructCalls::default());
    let note = smi.notes().join("\n");
    assert!(
        note.contains("99.5.0") && note.contains("only scalar calls"),
        "{note}"
    );
    let g = smi.gpus()[0].clone();
    assert!(g.name.contains("unknown ABI"), "{}", g.name);
    assert_eq!(g.bus_id.as_deref(), Some("0000:0c:00.0"));
    assert_eq!(g.vram_total_bytes, Some(192 * GIB));
    assert_eq!(g.compute_partition.as_deref(), Some("SPX"));
    assert_eq!(g.memory_partition.as_deref(), Some("NPS1"));
    assert_eq!(
        (g.compute_units, g.power_cap_w, g.kfd_gpu_id),
        (None, None, None)
    );

    let first = smi.sample().unwrap();
    let s = &first[0];
    assert_eq!((s.util_pct, s.mem_util_pct), (None, None));
    assert_eq!((s.sclk_mhz, s.mclk_mhz, &s.throttle), (None, None, &None));
    assert_eq!(s.vram_used_bytes, Some(150 * GIB));
    assert_eq!(s.temp_c, temps(&[("junction", 71.0), ("mem", 62.0)]));
    assert_eq!(s.power_w, None, "one energy reading gives no power yet");
    // The mock's energy counter advances 612 J per second of its timestamp.
    let second = smi.sample().unwrap();
    assert_eq!(second[0].power_w, Some(612.0));
    assert_eq!(second[0].power_kind, Some(PowerKind::Average));
    match smi.processes() {
        Err(TelemetryError::Read { what, message, .. }) => {
            assert_eq!(what, "process list");
            assert!(message.contains("99.5.0"), "{message}");
        }
        other => panic!("expected a Read error, got {other:?}"),
    }
    drop(smi);
    let log99 = calls(&log);
    assert!(log99.contains(&"amdsmi_get_lib_version".to_string()));
    assert!(log99.contains(&"amdsmi_get_energy_count".to_string()));
    let made: Vec<&String> = log99
        .iter()
        .filter(|c| STRUCT_CALLS.contains(&c.as_str()))
        .collect();
    assert!(
        made.is_empty(),
        "struct calls on an unknown major: {made:?}"
    );

    // -- 24.6 (year-scheme version struct, 32-bit power fields, 224-byte process entries) -----
    let mut smi = load_major(&lib, &log, "24");
    assert_eq!(smi.lib_version().to_string(), "24.6.1.0");
    let c = smi.struct_calls();
    assert!(
        c.power_info && c.process_list && !c.violation && !c.kfd_info,
        "{c:?}"
    );
    let g = smi.gpus()[0].clone();
    assert_eq!(g.name, "AMD Instinct MI300X");
    assert_eq!(g.compute_units, None, "24.6 asic info has no CU count");
    assert_eq!(g.power_cap_w, Some(750.0));
    assert_eq!(g.partition_index, None);
    let s = smi.sample().unwrap().remove(0);
    assert_eq!((s.util_pct, s.power_w), (Some(87.0), Some(612.0)));
    assert_eq!(s.power_kind, Some(PowerKind::Instant));
    assert_eq!((s.sclk_mhz, s.mclk_mhz), (Some(2100.0), Some(1300.0)));
    assert_eq!(s.throttle, None, "violation layout not encoded for 24");
    assert_eq!(smi.processes().unwrap(), python3_on_gpu0());
    drop(smi);
    assert!(!calls(&log).contains(&"amdsmi_get_violation_status".to_string()));

    // -- 25 (64-bit socket_power first, 32-bit rest) ------------------------------------------
    let mut smi = load_major(&lib, &log, "25");
    assert_eq!(smi.lib_version().to_string(), "25.5.0");
    let s = smi.sample().unwrap().remove(0);
    assert_eq!(s.power_w, Some(612.0));
    assert_eq!(s.throttle, Some(vec!["ppt-power".to_string()]));
    assert_eq!(smi.gpus()[0].name, "AMD Instinct MI300X");
    assert!(smi.processes().is_err(), "25.x process layout not encoded");
    drop(smi);
    assert!(!calls(&log).contains(&"amdsmi_get_gpu_process_list".to_string()));

    // -- amdsmi_init failure -------------------------------------------------------------------
    mock_env("AMDSMI_MOCK_MAJOR", Some("26"));
    mock_env("AMDSMI_MOCK_INIT_FAIL", Some("1"));
    let err = AmdSmi::load_from(&lib).err().expect("init failure");
    mock_env("AMDSMI_MOCK_INIT_FAIL", None);
    mock_env("AMDSMI_MOCK_CALL_LOG", None);
    mock_env("AMDSMI_MOCK_MAJOR", None);
    match &err {
        TelemetryError::Unavailable { backend, message } => {
            assert_eq!(*backend, "amd-smi");
            assert!(message.contains("amdsmi_init"), "{message}");
            assert!(message.contains("DRIVER_NOT_LOADED"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[test]
fn library_missing_at_a_given_path_is_unavailable() {
    let _guard = serial();
    let path = Path::new("/nonexistent/primus-tune/libamd_smi.so.26");
    match AmdSmi::load_from(path) {
        Err(TelemetryError::Unavailable { message, .. }) => {
            assert!(
                message.contains("/nonexistent/primus-tune/libamd_smi.so.26"),
                "{message}"
            );
        }
        Err(e) => panic!("expected Unavailable, got {e}"),
        Ok(_) => panic!("loaded a library that does not exist"),
    }
}

#[test]
fn a_library_without_the_symbols_is_unavailable() {
    let _guard = serial();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("empty.c");
    std::fs::write(&src, "int not_amd_smi(void) { return 0; }\n").unwrap();
    let lib = dir.path().join("libamd_smi.so.26");
    match Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .status()
    {
        Ok(s) => assert!(s.success(), "cc failed"),
        Err(e) => {
            eprintln!("skipped: no C compiler (`cc`: {e})");
            return;
        }
    }
    match AmdSmi::load_from(&lib) {
        Err(TelemetryError::Unavailable { message, .. }) => {
            assert!(message.contains("amdsmi_init"), "{message}");
        }
        Err(e) => panic!("expected Unavailable, got {e}"),
        Ok(_) => panic!("accepted a library without AMD SMI symbols"),
    }
}

#[test]
fn load_on_a_host_without_amd_smi_names_what_it_tried() {
    let _guard = serial();
    match AmdSmi::load() {
        Ok(smi) => eprintln!(
            "skipped: AMD SMI is installed here ({})",
            smi.library_path().display()
        ),
        Err(TelemetryError::Unavailable { message, .. }) if message.contains("amdsmi_") => {
            eprintln!("skipped: an AMD SMI library is installed here but does not start: {message}")
        }
        Err(TelemetryError::Unavailable { message, .. }) => {
            for want in [
                "libamd_smi.so.27",
                "libamd_smi.so.26",
                "libamd_smi.so.25",
                "libamd_smi.so.24",
                "/opt/rocm/lib/libamd_smi.so.26",
                "/opt/rocm/lib64/libamd_smi.so",
            ] {
                assert!(message.contains(want), "{want} not named in: {message}");
            }
        }
        Err(e) => panic!("expected Unavailable, got {e}"),
    }
}
