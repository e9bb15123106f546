#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The amdgpu sysfs backend against file trees: the real RX 6900 XT sysfs snapshot in
//! `../shared` (tests named `shared_*`, copied into a temp root at test time) and the
//! MI300X-shaped trees in `tests/fixtures/sysfs/` (SPX/NPS1 8-GPU node, CPX/NPS4 single GPU,
//! fdinfo and KFD process files). Expected values are computed here from the files themselves,
//! with the unit conversions the backend documents.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use primus_tune::telemetry::amd_sysfs::AmdSysfs;
use primus_tune::telemetry::{
    Backend, GpuInfo, GpuSample, PowerKind, ProcessSample, TelemetryError,
};

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sysfs")
        .join(name)
}

fn shared_snapshot() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/telemetry/sysfs_amdgpu_rx6900xt");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("skipping: {} is absent", p.display());
        None
    }
}

/// Copies a tree, recreating symlinks as symlinks.
fn copy_tree(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for entry in fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        let to = dst.join(entry.file_name());
        if kind.is_symlink() {
            symlink(fs::read_link(entry.path()).unwrap(), &to).unwrap();
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &to);
        } else {
            fs::copy(entry.path(), &to).unwrap();
        }
    }
}

/// A writable copy of a fixture tree (`sys/` and `proc/`).
fn fixture_copy(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&fixture(name), tmp.path());
    tmp
}

fn open(root: &Path) -> AmdSysfs {
    AmdSysfs::open(&root.join("sys"), &root.join("proc")).expect("open")
}

/// File content with whitespace and NUL padding removed.
fn text(path: &Path) -> Option<String> {
    let bytes = fs::read(path).ok()?;
    Some(
        String::from_utf8_lossy(&bytes)
            .trim_matches(|c: char| c.is_whitespace() || c == '\0')
            .to_owned(),
    )
}

fn int(path: &Path) -> Option<i64> {
    text(path)?.parse().ok()
}

fn uint(path: &Path) -> Option<u64> {
    text(path)?.parse().ok()
}

/// The MHz of the `*` line of a pp_dpm file (all fixtures use `Mhz`).
fn dpm_star(path: &Path) -> Option<f64> {
    let body = text(path)?;
    let line = body.lines().find(|l| l.contains('*'))?;
    let freq = line.split(':').nth(1)?.trim().trim_end_matches('*').trim();
    freq.strip_suffix("Mhz")?.parse().ok()
}

fn hwmon_of(dev: &Path) -> PathBuf {
    let mut dirs: Vec<PathBuf> = fs::read_dir(dev.join("hwmon"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .find(|d| text(&d.join("name")).as_deref() == Some("amdgpu"))
        .expect("amdgpu hwmon")
}

/// What a sample of the PCI device at `dev` should hold, from its files.
#[derive(Debug, PartialEq)]
struct Expected {
    util: Option<f64>,
    mem_util: Option<f64>,
    vram_used: Option<u64>,
    vram_total: Option<u64>,
    power: Option<(f64, PowerKind)>,
    power_cap: Option<f64>,
    temps: BTreeMap<String, f64>,
    sclk: Option<f64>,
    mclk: Option<f64>,
}

fn freq_by_label(hw: &Path, label: &str) -> Option<f64> {
    (1..=4).find_map(|n| {
        (text(&hw.join(format!("freq{n}_label"))).as_deref() == Some(label))
            .then(|| uint(&hw.join(format!("freq{n}_input"))).map(|hz| hz as f64 / 1e6))
            .flatten()
    })
}

fn expected(dev: &Path) -> Expected {
    let hw = hwmon_of(dev);
    let power = match uint(&hw.join("power1_average")) {
        Some(uw) => Some((uw as f64 / 1e6, PowerKind::Average)),
        None => uint(&hw.join("power1_input")).map(|uw| (uw as f64 / 1e6, PowerKind::Instant)),
    };
    let mut temps = BTreeMap::new();
    for n in 1..=9 {
        if let Some(mc) = int(&hw.join(format!("temp{n}_input"))) {
            let key = text(&hw.join(format!("temp{n}_label")))
                .filter(|l| !l.is_empty())
                .map_or_else(|| format!("temp{n}"), |l| l.to_lowercase());
            temps.insert(key, mc as f64 / 1000.0);
        }
    }
    Expected {
        util: uint(&dev.join("gpu_busy_percent")).map(|v| v as f64),
        mem_util: uint(&dev.join("mem_busy_percent")).map(|v| v as f64),
        vram_used: uint(&dev.join("mem_info_vram_used")),
        vram_total: uint(&dev.join("mem_info_vram_total")),
        power,
        power_cap: uint(&hw.join("power1_cap")).map(|uw| uw as f64 / 1e6),
        temps,
        sclk: freq_by_label(&hw, "sclk").or_else(|| dpm_star(&dev.join("pp_dpm_sclk"))),
        mclk: freq_by_label(&hw, "mclk").or_else(|| dpm_star(&dev.join("pp_dpm_mclk"))),
    }
}

fn actual(info: &GpuInfo, s: &GpuSample) -> Expected {
    Expected {
        util: s.util_pct,
        mem_util: s.mem_util_pct,
        vram_used: s.vram_used_bytes,
        vram_total: s.vram_total_bytes,
        power: s.power_w.zip(s.power_kind),
        power_cap: info.power_cap_w,
        temps: s.temp_c.clone(),
        sclk: s.sclk_mhz,
        mclk: s.mclk_mhz,
    }
}

/// `drm-memory-vram` (KiB) of an fdinfo file, in bytes.
fn fdinfo_vram(path: &Path, key: &str) -> u64 {
    let body = text(path).unwrap();
    let line = body.lines().find(|l| l.starts_with(key)).unwrap();
    let value = line.split(':').nth(1).unwrap().trim();
    let (n, unit) = value.split_once(' ').unwrap();
    let n: u64 = n.parse().unwrap();
    match unit {
        "KiB" => n << 10,
        "MiB" => n << 20,
        "GiB" => n << 30,
        other => panic!("unit {other}"),
    }
}

fn kfd_gpu_id(sys: &Path, node: u32) -> u64 {
    uint(&sys.join(format!("class/kfd/kfd/topology/nodes/{node}/gpu_id"))).unwrap()
}

fn kfd_vram(sys: &Path, pid: u32, gpu_id: u64) -> u64 {
    uint(&sys.join(format!("class/kfd/kfd/proc/{pid}/vram_{gpu_id}"))).unwrap()
}

fn kfd_prop(sys: &Path, node: u32, key: &str) -> u64 {
    let body = text(&sys.join(format!("class/kfd/kfd/topology/nodes/{node}/properties"))).unwrap();
    body.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.parse().ok())
        .unwrap()
}

fn proc_sample(pid: u32, gpu: u32, vram_bytes: u64, name: Option<&str>) -> ProcessSample {
    ProcessSample {
        pid,
        gpu,
        vram_bytes,
        name: name.map(str::to_owned),
    }
}

// ---------------------------------------------------------------------------------------------
// the real RX 6900 XT snapshot
// ---------------------------------------------------------------------------------------------

/// `sys/class/drm/<node>/device` = a copy of the snapshot, plus a connector entry and `version`.
fn rx6900xt_root(snapshot: &Path, node: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let drm = tmp.path().join("sys/class/drm");
    copy_tree(snapshot, &drm.join(node).join("device"));
    fs::create_dir_all(drm.join(format!("{node}-DP-1"))).unwrap();
    fs::write(drm.join(format!("{node}-DP-1/status")), "disconnected\n").unwrap();
    fs::write(drm.join("version"), "drm 1.1.0 20060810\n").unwrap();
    fs::create_dir_all(tmp.path().join("proc")).unwrap();
    tmp
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_rx6900xt_values_match_the_files() {
    let Some(snapshot) = shared_snapshot() else {
        return;
    };
    let root = rx6900xt_root(&snapshot, "card0");
    let dev = root.path().join("sys/class/drm/card0/device");
    let mut backend = open(root.path());
    assert_eq!(backend.name(), "amdgpu-sysfs");

    let gpus = backend.gpus().to_vec();
    assert_eq!(gpus.len(), 1, "{gpus:#?}");
    let info = &gpus[0];
    let uevent = text(&dev.join("uevent")).unwrap();
    let field = |key: &str| {
        uevent
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .unwrap()
            .to_owned()
    };
    // product_name is empty in this snapshot: the name comes from the PCI device id and
    // revision (libdrm's amdgpu.ids: 73BF, C0 is the RX 6900 XT), as amdgpu_top shows it.
    let product = text(&dev.join("product_name")).unwrap();
    assert!(product.is_empty());
    let device_id = field("PCI_ID").split_once(':').unwrap().1.to_lowercase();
    assert_eq!(
        (device_id.as_str(), text(&dev.join("revision")).as_deref()),
        ("73bf", Some("0xc0"))
    );
    assert_eq!(info.name, "AMD Radeon RX 6900 XT");
    assert_eq!(info.backend, "amdgpu-sysfs");
    assert_eq!(
        info.bus_id.as_deref(),
        Some(field("PCI_SLOT_NAME").as_str())
    );
    assert_eq!(info.uuid, text(&dev.join("unique_id")));
    assert_eq!(
        info.vram_total_bytes,
        uint(&dev.join("mem_info_vram_total"))
    );
    assert_eq!(info.card.as_deref(), Some("card0"));
    assert_eq!(info.physical_id, Some(0));
    assert_eq!(
        (
            &info.compute_partition,
            &info.memory_partition,
            info.partition_index
        ),
        (&None, &None, None)
    );
    assert_eq!((info.compute_units, info.kfd_gpu_id), (None, None));

    let samples = backend.sample().unwrap();
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0].gpu, 0);
    let want = expected(&dev);
    assert_eq!(actual(info, &samples[0]), want);
    // The literal values, so a bug shared by the helper and the backend cannot hide.
    assert_eq!(want.util, Some(3.0));
    assert_eq!(want.vram_used, Some(668_274_688));
    assert_eq!(want.vram_total, Some(17_163_091_968));
    assert_eq!(want.power, Some((36.0, PowerKind::Average)));
    assert_eq!(want.power_cap, Some(289.0));
    let temps: Vec<(&str, f64)> = want.temps.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(temps, [("edge", 56.0), ("junction", 59.0), ("mem", 54.0)]);
    assert_eq!((want.sclk, want.mclk), (Some(500.0), Some(1000.0)));
    // hwmon and pp_dpm agree in the snapshot.
    assert_eq!(dpm_star(&dev.join("pp_dpm_sclk")), want.sclk);
    assert_eq!(dpm_star(&dev.join("pp_dpm_mclk")), want.mclk);
    assert!(samples[0].throttle.is_none());

    assert_eq!(backend.processes().unwrap(), []);
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_rx6900xt_pp_dpm_fallback_and_vanishing_files() {
    let Some(snapshot) = shared_snapshot() else {
        return;
    };
    let root = rx6900xt_root(&snapshot, "card1");
    let dev = root.path().join("sys/class/drm/card1/device");
    let hw = dev.join("hwmon/hwmon5");
    for f in ["freq1_input", "freq1_label", "freq2_input", "freq2_label"] {
        fs::remove_file(hw.join(f)).unwrap();
    }
    let mut backend = open(root.path());
    let s = &backend.sample().unwrap()[0];
    assert_eq!(s.sclk_mhz, dpm_star(&dev.join("pp_dpm_sclk")));
    assert_eq!(s.mclk_mhz, dpm_star(&dev.join("pp_dpm_mclk")));
    assert_eq!((s.sclk_mhz, s.mclk_mhz), (Some(500.0), Some(1000.0)));
    assert_eq!(backend.gpus()[0].card.as_deref(), Some("card1"));

    // Files that disappear after open give None for their reading only.
    fs::remove_file(hw.join("power1_average")).unwrap();
    fs::remove_file(hw.join("temp2_input")).unwrap();
    fs::remove_file(dev.join("pp_dpm_sclk")).unwrap();
    let s = &backend.sample().unwrap()[0];
    assert_eq!((s.power_w, s.power_kind), (None, None));
    assert_eq!(s.sclk_mhz, None);
    assert_eq!(s.temp_c.keys().collect::<Vec<_>>(), ["edge", "mem"]);
    assert_eq!(s.util_pct, Some(3.0));
    assert_eq!(s.mclk_mhz, Some(1000.0));
}

#[test]
#[cfg_attr(
    not(shared_fixtures),
    ignore = "needs ../shared/fixtures beside the checkout (absent when the tests were built)"
)]
fn shared_rx6900xt_render_node_only_and_vendor_detection() {
    let Some(snapshot) = shared_snapshot() else {
        return;
    };
    // No driver link and no uevent: vendor 0x1002 + the amdgpu files still identify it.
    let root = rx6900xt_root(&snapshot, "renderD128");
    let dev = root.path().join("sys/class/drm/renderD128/device");
    fs::remove_file(dev.join("uevent")).unwrap();
    let backend = open(root.path());
    let info = &backend.gpus()[0];
    assert_eq!(info.card.as_deref(), Some("renderD128"));
    assert_eq!(info.bus_id, None);
    assert_eq!(info.name, "AMD GPU");
    assert_eq!(
        info.vram_total_bytes,
        uint(&dev.join("mem_info_vram_total"))
    );
}

// ---------------------------------------------------------------------------------------------
// MI300X, SPX / NPS1, 8 GPUs
// ---------------------------------------------------------------------------------------------

const SPX_BUSES: [&str; 8] = [
    "0000:05:00.0",
    "0000:26:00.0",
    "0000:46:00.0",
    "0000:65:00.0",
    "0000:85:00.0",
    "0000:a6:00.0",
    "0000:c5:00.0",
    "0000:e5:00.0",
];

fn spx_dev(sys: &Path, i: usize) -> PathBuf {
    sys.join("devices/pci0000:00").join(SPX_BUSES[i])
}

#[test]
fn mi300x_spx_gpus() {
    let root = fixture("mi300x_spx_nps1");
    let sys = root.join("sys");
    let backend = open(&root);
    let gpus = backend.gpus();
    // The ASPEED card0, its connector and the 56 idle amdgpu_xcp devices are not GPUs.
    assert_eq!(gpus.len(), 8, "{gpus:#?}");
    for (i, g) in gpus.iter().enumerate() {
        let dev = spx_dev(&sys, i);
        let node = 2 + i as u32; // KFD nodes 0 and 1 are the CPU sockets
        assert_eq!(g.index, i as u32);
        assert_eq!(g.name, text(&dev.join("product_name")).unwrap());
        assert_eq!(g.name, "AMD Instinct MI300X OAM");
        assert_eq!(g.bus_id.as_deref(), Some(SPX_BUSES[i]));
        assert_eq!(g.uuid, text(&dev.join("unique_id")));
        assert_eq!(g.vram_total_bytes, uint(&dev.join("mem_info_vram_total")));
        assert_eq!(g.vram_total_bytes, Some(206_141_652_992));
        let cus = kfd_prop(&sys, node, "simd_count") / kfd_prop(&sys, node, "simd_per_cu");
        assert_eq!(g.compute_units, Some(cus as u32));
        assert_eq!(g.compute_units, Some(304));
        assert_eq!(g.kfd_gpu_id, Some(kfd_gpu_id(&sys, node)));
        assert_eq!(g.physical_id, Some(i as u32));
        assert_eq!(
            g.compute_partition,
            text(&dev.join("current_compute_partition"))
        );
        assert_eq!(g.compute_partition.as_deref(), Some("SPX"));
        assert_eq!(g.memory_partition.as_deref(), Some("NPS1"));
        assert_eq!(g.partition_index, Some(0));
        assert_eq!(g.power_cap_w, Some(750.0));
        assert_eq!(g.card, Some(format!("card{}", 1 + 8 * i)));
    }
}

#[test]
fn mi300x_spx_samples_match_the_files() {
    let root = fixture("mi300x_spx_nps1");
    let sys = root.join("sys");
    let mut backend = open(&root);
    let gpus = backend.gpus().to_vec();
    let samples = backend.sample().unwrap();
    assert_eq!(samples.len(), 8);
    for (i, s) in samples.iter().enumerate() {
        assert_eq!(s.gpu, i as u32);
        let want = expected(&spx_dev(&sys, i));
        assert_eq!(actual(&gpus[i], s), want, "gpu {i}");
        // MI300X: no edge sensor, instantaneous power only.
        assert_eq!(s.temp_c.keys().collect::<Vec<_>>(), ["junction", "mem"]);
        assert_eq!(s.power_kind, Some(PowerKind::Instant));
        assert!(s.throttle.is_none());
    }
    // Literal spot checks (GPU0's power1_input and pp_dpm_sclk are NUL/space padded).
    let s0 = &samples[0];
    assert_eq!(
        (s0.power_w, s0.util_pct, s0.mem_util_pct),
        (Some(612.0), Some(100.0), Some(41.0))
    );
    assert_eq!((s0.sclk_mhz, s0.mclk_mhz), (Some(2100.0), Some(1300.0)));
    assert_eq!(s0.temp_c["junction"], 71.0);
    assert_eq!(samples[1].sclk_mhz, Some(1427.0));
    assert_eq!(samples[2].sclk_mhz, Some(142.0));
    assert_eq!(samples[3].sclk_mhz, Some(132.0)); // deep-sleep level `S: 132Mhz *`
    assert_eq!(samples[6].temp_c["junction"], 35.5);
    assert_eq!(samples[2].power_w, Some(131.0));
    assert_eq!(samples[2].mclk_mhz, Some(900.0));
}

fn spx_expected_processes(root: &Path) -> Vec<ProcessSample> {
    let sys = root.join("sys");
    let proc = root.join("proc");
    let ids: Vec<u64> = (0..8).map(|i| kfd_gpu_id(&sys, 2 + i)).collect();
    // 4101: fds 12 and 13 are one client (counted once); KFD and fdinfo overlap → the larger.
    let fd12 = fdinfo_vram(&proc.join("4101/fdinfo/12"), "drm-memory-vram");
    let gpu0 = fd12.max(kfd_vram(&sys, 4101, ids[0]));
    let gpu1 = fdinfo_vram(&proc.join("4101/fdinfo/14"), "drm-memory-vram")
        .max(kfd_vram(&sys, 4101, ids[1]));
    // 4102: new-style keys only.
    let gpu3 = fdinfo_vram(&proc.join("4102/fdinfo/9"), "drm-resident-vram")
        .max(kfd_vram(&sys, 4102, ids[3]));
    vec![
        proc_sample(4101, 0, gpu0, Some("python3")),
        proc_sample(4101, 1, gpu1, Some("python3")),
        proc_sample(4102, 3, gpu3, Some("pt_main_thread")),
        proc_sample(
            4102,
            4,
            kfd_vram(&sys, 4102, ids[4]),
            Some("pt_main_thread"),
        ),
        // KFD process from another pid namespace: no comm.
        proc_sample(9100, 7, kfd_vram(&sys, 9100, ids[7]), None),
    ]
}

#[test]
fn mi300x_spx_processes() {
    let root = fixture("mi300x_spx_nps1");
    let mut backend = open(&root);
    let got = backend.processes().unwrap();
    let want = spx_expected_processes(&root);
    assert_eq!(got, want);
    // The literal figures.
    let bytes: Vec<u64> = got.iter().map(|p| p.vram_bytes).collect();
    assert_eq!(
        bytes,
        [33_570_816 * 1024, 1 << 30, 16 << 30, 512 << 20, 1 << 30]
    );
}

#[test]
fn mi300x_processes_skip_vanished_and_unreadable_pids() {
    let tmp = fixture_copy("mi300x_spx_nps1");
    let proc = tmp.path().join("proc");
    // 4242: an fd listed in fdinfo that is gone by the time it is read.
    fs::create_dir_all(proc.join("4242/fdinfo")).unwrap();
    fs::write(proc.join("4242/comm"), "ghost\n").unwrap();
    symlink("/nonexistent/fdinfo/3", proc.join("4242/fdinfo/3")).unwrap();
    // 4243: the whole pid went away between the /proc listing and reading it.
    symlink("/nonexistent/4243", proc.join("4243")).unwrap();
    // 4244: fdinfo not a readable directory.
    fs::create_dir_all(proc.join("4244")).unwrap();
    fs::write(proc.join("4244/fdinfo"), "").unwrap();
    // fd links present for 4101: the DRM ones are still read, the tty one is skipped unread.
    let fd = proc.join("4101/fd");
    fs::create_dir_all(&fd).unwrap();
    symlink("/dev/pts/0", fd.join("0")).unwrap();
    symlink("/dev/dri/renderD128", fd.join("12")).unwrap();
    symlink("/dev/dri/renderD128", fd.join("13")).unwrap();
    symlink("/dev/dri/renderD136", fd.join("14")).unwrap();
    // A KFD directory for a pid that exited, without vram files any more.
    fs::create_dir_all(tmp.path().join("sys/class/kfd/kfd/proc/4245")).unwrap();

    let mut backend = open(tmp.path());
    assert_eq!(
        backend.processes().unwrap(),
        spx_expected_processes(&fixture("mi300x_spx_nps1"))
    );

    fs::remove_dir_all(&proc).unwrap();
    let err = backend.processes().unwrap_err();
    assert!(matches!(err, TelemetryError::Read { .. }), "{err}");
}

#[test]
fn mi300x_spx_unreadable_sensor_files_give_none() {
    let tmp = fixture_copy("mi300x_spx_nps1");
    let sys = tmp.path().join("sys");
    let mut backend = open(tmp.path());
    let hw0 = hwmon_of(&spx_dev(&sys, 0));
    fs::remove_file(hw0.join("power1_input")).unwrap();
    fs::write(spx_dev(&sys, 1).join("gpu_busy_percent"), "garbage\n").unwrap();
    fs::remove_file(hwmon_of(&spx_dev(&sys, 2)).join("temp3_input")).unwrap();
    fs::write(
        spx_dev(&sys, 3).join("pp_dpm_sclk"),
        "0: 500Mhz\n1: 2100Mhz\n",
    )
    .unwrap();
    fs::write(spx_dev(&sys, 4).join("mem_info_vram_used"), "\0\0\0\0").unwrap();

    let samples = backend.sample().unwrap();
    assert_eq!((samples[0].power_w, samples[0].power_kind), (None, None));
    assert_eq!(samples[0].util_pct, Some(100.0));
    assert_eq!(samples[1].util_pct, None);
    assert_eq!(samples[1].power_w, Some(598.0));
    assert_eq!(samples[2].temp_c.keys().collect::<Vec<_>>(), ["junction"]);
    assert_eq!(samples[3].sclk_mhz, None); // no level marked `*`
    assert_eq!(samples[4].vram_used_bytes, None);
    assert_eq!(samples[4].vram_total_bytes, Some(206_141_652_992));
    for (i, s) in samples.iter().enumerate().skip(5) {
        assert_eq!(actual(&backend.gpus()[i], s), expected(&spx_dev(&sys, i)));
    }
}

#[test]
fn mi300x_spx_without_kfd_topology() {
    let tmp = fixture_copy("mi300x_spx_nps1");
    fs::remove_dir_all(tmp.path().join("sys/class/kfd")).unwrap();
    let mut backend = open(tmp.path());
    let gpus = backend.gpus().to_vec();
    // SPX: the idle partition devices stay out even without KFD to tell.
    assert_eq!(gpus.len(), 8);
    assert!(
        gpus.iter()
            .all(|g| g.compute_units.is_none() && g.kfd_gpu_id.is_none())
    );
    assert_eq!(
        gpus.iter()
            .map(|g| g.bus_id.as_deref().unwrap())
            .collect::<Vec<_>>(),
        SPX_BUSES
    );
    assert_eq!(backend.sample().unwrap()[0].power_w, Some(612.0));
    // fdinfo only now.
    let procs = backend.processes().unwrap();
    assert_eq!(
        procs
            .iter()
            .map(|p| (p.pid, p.gpu, p.vram_bytes))
            .collect::<Vec<_>>(),
        [
            (4101, 0, 33_570_816 * 1024),
            (4101, 1, 1 << 30),
            (4102, 3, 16 << 30)
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// MI300X, CPX / NPS4: one device, 8 logical GPUs
// ---------------------------------------------------------------------------------------------

fn cpx_dev(sys: &Path) -> PathBuf {
    sys.join("devices/pci0000:00/0000:0c:00.0")
}

#[test]
fn mi300x_cpx_logical_gpus() {
    let root = fixture("mi300x_cpx_nps4");
    let sys = root.join("sys");
    let dev = cpx_dev(&sys);
    let backend = open(&root);
    let gpus = backend.gpus();
    assert_eq!(gpus.len(), 8, "{gpus:#?}");
    let total = uint(&dev.join("mem_info_vram_total")).unwrap();
    // NPS4: each logical GPU sees a quarter (amd-smi: 48.0 GB of 192.0 GB).
    let nps: u64 = text(&dev.join("current_memory_partition"))
        .unwrap()
        .strip_prefix("NPS")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(nps, 4);
    for (i, g) in gpus.iter().enumerate() {
        let node = 1 + i as u32;
        assert_eq!(g.index, i as u32);
        assert_eq!(g.name, "AMD Instinct MI300X"); // no product_name: from the device id 0x74a1
        assert_eq!(g.physical_id, Some(0));
        assert_eq!(g.bus_id.as_deref(), Some("0000:0c:00.0"));
        assert_eq!(g.partition_index, Some(i as u32));
        assert_eq!(g.compute_partition.as_deref(), Some("CPX"));
        assert_eq!(g.memory_partition.as_deref(), Some("NPS4"));
        assert_eq!(g.vram_total_bytes, Some(total / nps));
        assert_eq!(g.vram_total_bytes, Some(51_535_413_248));
        assert_eq!(g.card, Some(format!("card{i}")));
        assert_eq!(g.kfd_gpu_id, Some(kfd_gpu_id(&sys, node)));
        assert_eq!(
            kfd_prop(&sys, node, "drm_render_minor"),
            128 + i as u64,
            "fixture: node {node} is renderD{}",
            128 + i
        );
        let cus = kfd_prop(&sys, node, "simd_count") / kfd_prop(&sys, node, "simd_per_cu");
        assert_eq!(g.compute_units, Some(cus as u32));
        assert_eq!(g.compute_units, Some(38));
        if i == 0 {
            assert_eq!(g.power_cap_w, Some(750.0));
            assert_eq!(g.uuid, text(&dev.join("unique_id")));
        } else {
            assert_eq!((g.power_cap_w, &g.uuid), (None, &None));
        }
    }
}

#[test]
fn mi300x_cpx_only_partition_0_reports_sensors() {
    let root = fixture("mi300x_cpx_nps4");
    let sys = root.join("sys");
    let dev = cpx_dev(&sys);
    let mut backend = open(&root);
    let gpus = backend.gpus().to_vec();
    let samples = backend.sample().unwrap();
    assert_eq!(samples.len(), 8);

    let want = expected(&dev);
    let s0 = &samples[0];
    assert_eq!(s0.util_pct, want.util);
    assert_eq!(s0.mem_util_pct, want.mem_util);
    assert_eq!(s0.power_w.zip(s0.power_kind), want.power);
    assert_eq!(s0.temp_c, want.temps);
    assert_eq!((s0.sclk_mhz, s0.mclk_mhz), (want.sclk, want.mclk));
    assert_eq!(gpus[0].power_cap_w, want.power_cap);
    // amd-smi monitor on CPX/NPS4: 183 W, 49 °C / 48 °C, 1427 MHz on XCP 0.
    assert_eq!(s0.power_w, Some(183.0));
    assert_eq!(s0.power_kind, Some(PowerKind::Instant));
    let temps: Vec<(&str, f64)> = s0.temp_c.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(temps, [("junction", 49.0), ("mem", 48.0)]);
    assert_eq!(s0.sclk_mhz, Some(1427.0));

    for s in &samples[1..] {
        assert_eq!(
            (s.util_pct, s.mem_util_pct, s.power_w, s.power_kind),
            (None, None, None, None)
        );
        assert!(s.temp_c.is_empty());
        assert_eq!((s.sclk_mhz, s.mclk_mhz), (None, None));
    }

    // VRAM: each partition's share; used = its KFD processes' memory.
    let ids: Vec<u64> = (1..=8).map(|n| kfd_gpu_id(&sys, n)).collect();
    let mut used = [0u64; 8];
    used[0] = kfd_vram(&sys, 5001, ids[0]);
    used[1] = kfd_vram(&sys, 5001, ids[1]);
    used[3] = kfd_vram(&sys, 5002, ids[3]);
    for (i, s) in samples.iter().enumerate() {
        assert_eq!(s.vram_total_bytes, gpus[i].vram_total_bytes);
        assert_eq!(s.vram_used_bytes, Some(used[i]), "partition {i}");
    }
    assert_eq!(used[..4], [10 << 30, 512 << 20, 0, 512 << 20]);
}

#[test]
fn mi300x_cpx_processes_per_partition() {
    let root = fixture("mi300x_cpx_nps4");
    let sys = root.join("sys");
    let proc = root.join("proc");
    let ids: Vec<u64> = (1..=8).map(|n| kfd_gpu_id(&sys, n)).collect();
    let mut backend = open(&root);
    let got = backend.processes().unwrap();
    let want = vec![
        // KFD is per partition; 5001's fdinfo (charged to the PCI function) is not added.
        proc_sample(5001, 0, kfd_vram(&sys, 5001, ids[0]), Some("python3")),
        // A DRM-only client lands on partition 0.
        proc_sample(
            5003,
            0,
            fdinfo_vram(&proc.join("5003/fdinfo/3"), "drm-memory-vram"),
            Some("amdgpu_test"),
        ),
        proc_sample(5001, 1, kfd_vram(&sys, 5001, ids[1]), Some("python3")),
        proc_sample(5002, 3, kfd_vram(&sys, 5002, ids[3]), Some("python3")),
    ];
    assert_eq!(got, want);
    assert_eq!(got[1].vram_bytes, 1 << 30);
}

#[test]
fn mi300x_cpx_without_kfd_uses_partition_numbering() {
    let tmp = fixture_copy("mi300x_cpx_nps4");
    fs::remove_dir_all(tmp.path().join("sys/class/kfd")).unwrap();
    let mut backend = open(tmp.path());
    let gpus = backend.gpus().to_vec();
    assert_eq!(gpus.len(), 8);
    for (i, g) in gpus.iter().enumerate() {
        assert_eq!(g.physical_id, Some(0));
        assert_eq!(g.partition_index, Some(i as u32));
        assert_eq!(g.card, Some(format!("card{i}")));
        assert_eq!((g.kfd_gpu_id, g.compute_units), (None, None));
        assert_eq!(g.vram_total_bytes, Some(206_141_652_992 / 4));
    }
    let samples = backend.sample().unwrap();
    assert_eq!(samples[0].power_w, Some(183.0));
    assert!(samples.iter().all(|s| s.vram_used_bytes.is_none()));
    assert!(samples[1..].iter().all(|s| s.power_w.is_none()));
    // Only fdinfo: everything on the device is charged to partition 0.
    let procs = backend.processes().unwrap();
    assert!(procs.iter().all(|p| p.gpu == 0), "{procs:?}");
    assert_eq!(
        procs.iter().map(|p| p.pid).collect::<Vec<_>>(),
        [5001, 5002, 5003]
    );
}

#[test]
fn mi300x_cpx_drops_partitions_kfd_does_not_list() {
    // A QPX-sized KFD view of the same tree: partitions 4..7 have no KFD node.
    let tmp = fixture_copy("mi300x_cpx_nps4");
    let nodes = tmp.path().join("sys/class/kfd/kfd/topology/nodes");
    for n in 5..=8 {
        fs::remove_dir_all(nodes.join(n.to_string())).unwrap();
    }
    let backend = open(tmp.path());
    let cards: Vec<_> = backend
        .gpus()
        .iter()
        .map(|g| g.card.clone().unwrap())
        .collect();
    assert_eq!(cards, ["card0", "card1", "card2", "card3"]);
}

// ---------------------------------------------------------------------------------------------
// no GPU
// ---------------------------------------------------------------------------------------------

#[test]
fn open_without_amdgpu_is_unavailable() {
    let tmp = tempfile::tempdir().unwrap();
    let err = AmdSysfs::open(&tmp.path().join("sys"), &tmp.path().join("proc")).unwrap_err();
    assert!(
        matches!(
            err,
            TelemetryError::Unavailable {
                backend: "amdgpu-sysfs",
                ..
            }
        ),
        "{err}"
    );

    // Only the BMC's VGA (ast) and its connector.
    let dev = tmp.path().join("sys/devices/pci0000:00/0000:02:00.0");
    fs::create_dir_all(dev.join("drm/card0")).unwrap();
    fs::write(dev.join("vendor"), "0x1a03\n").unwrap();
    fs::write(
        dev.join("uevent"),
        "DRIVER=ast\nPCI_SLOT_NAME=0000:02:00.0\n",
    )
    .unwrap();
    let class = tmp.path().join("sys/class/drm");
    fs::create_dir_all(&class).unwrap();
    symlink("../../../0000:02:00.0", dev.join("drm/card0/device")).unwrap();
    symlink(
        "../../devices/pci0000:00/0000:02:00.0/drm/card0",
        class.join("card0"),
    )
    .unwrap();
    fs::create_dir_all(class.join("card0-VGA-1")).unwrap();
    let err = AmdSysfs::open(&tmp.path().join("sys"), &tmp.path().join("proc")).unwrap_err();
    assert!(err.to_string().contains("no amdgpu device"), "{err}");

    // A non-amdgpu driver on an AMD vendor id (vfio-pci passthrough) is not ours either.
    let gpu = tmp.path().join("sys/devices/pci0000:00/0000:0c:00.0");
    fs::create_dir_all(gpu.join("drm/card1")).unwrap();
    fs::write(gpu.join("vendor"), "0x1002\n").unwrap();
    fs::write(gpu.join("gpu_busy_percent"), "0\n").unwrap();
    fs::create_dir_all(tmp.path().join("sys/bus/pci/drivers/vfio-pci")).unwrap();
    symlink("../../../bus/pci/drivers/vfio-pci", gpu.join("driver")).unwrap();
    symlink("../../../0000:0c:00.0", gpu.join("drm/card1/device")).unwrap();
    symlink(
        "../../devices/pci0000:00/0000:0c:00.0/drm/card1",
        class.join("card1"),
    )
    .unwrap();
    assert!(AmdSysfs::open(&tmp.path().join("sys"), &tmp.path().join("proc")).is_err());
}
