//! `monitor`'s terminal view, a pure function of a sample: the GPU table fitted to the terminal's
//! width (columns dropped or shortened by priority: memory clock, then the name, temperatures
//! down to the hottest sensor, shader clock, power), the host line, and the per-process table
//! nvitop and amdgpu_top users expect (PID, user, GPU, VRAM, command; a trial's processes
//! marked with its id). Every line fits the width and the view fits the height, so that the
//! refresh can move the cursor back over exactly the lines it drew.

use crate::telemetry::sampler::Snapshot;
use crate::telemetry::{GpuInfo, GpuSample};
use crate::util::procinfo::ProcInfo;

/// A process holding GPU memory, with what `/proc` says of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcRow {
    pub pid: u32,
    pub gpu: u32,
    pub vram_bytes: u64,
    pub info: ProcInfo,
}

/// A column: its header, its cells, right-aligned or not, and the width it is given.
struct Col {
    head: String,
    cells: Vec<String>,
    right: bool,
    width: usize,
}

impl Col {
    fn new(head: &str, cells: Vec<String>, right: bool) -> Col {
        let width = cells
            .iter()
            .map(|c| c.chars().count())
            .chain([head.chars().count()])
            .max()
            .unwrap_or(0);
        Col {
            head: head.to_string(),
            cells,
            right,
            width,
        }
    }
}

fn total(cols: &[Col]) -> usize {
    cols.iter().map(|c| c.width).sum::<usize>() + cols.len().saturating_sub(1)
}

use crate::util::text::fit as cut;

fn pad(s: &str, w: usize, right: bool) -> String {
    let s = cut(s, w);
    if right {
        format!("{s:>w$}")
    } else {
        format!("{s:<w$}")
    }
}

/// Header and rows of the columns, each line within `width`.
fn render(cols: &[Col], width: usize) -> Vec<String> {
    let rows = cols.first().map_or(0, |c| c.cells.len());
    let line = |cell: &dyn Fn(&Col) -> String| {
        let text: Vec<String> = cols
            .iter()
            .map(|c| pad(&cell(c), c.width, c.right))
            .collect();
        cut(text.join(" ").trim_end(), width)
    };
    let mut out = vec![line(&|c: &Col| c.head.clone())];
    for r in 0..rows {
        out.push(line(&|c: &Col| c.cells[r].clone()));
    }
    out
}

fn position(cols: &[Col], head: &str) -> Option<usize> {
    cols.iter().position(|c| c.head == head)
}

fn drop_col(cols: &mut Vec<Col>, head: &str) {
    if let Some(i) = position(cols, head) {
        cols.remove(i);
    }
}

/// Narrows the column to what the width leaves it, not below `min`.
fn shrink(cols: &mut [Col], head: &str, width: usize, min: usize) {
    let over = total(cols).saturating_sub(width);
    if let Some(i) = position(cols, head) {
        let c = &mut cols[i];
        c.width = c.width.saturating_sub(over).max(min.min(c.width));
    }
}

/// A GPU's name in `w` columns: the vendor's words go before the model is cut.
pub fn short_name(name: &str, w: usize) -> String {
    let mut n = name.to_string();
    for word in ["AMD ", "NVIDIA ", "Instinct ", "Radeon ", " OAM"] {
        if n.chars().count() <= w {
            break;
        }
        n = n.replacen(word, "", 1);
    }
    cut(&n, w)
}

fn gib(b: Option<u64>) -> String {
    b.map_or("-".into(), |b| {
        format!("{:.1}", b as f64 / (1u64 << 30) as f64)
    })
}

fn opt(v: Option<f64>, unit: &str) -> String {
    v.map_or("-".into(), |x| format!("{x:.0}{unit}"))
}

fn short_label(k: &str) -> String {
    match k {
        "edge" => "E:".into(),
        "junction" => "J:".into(),
        "mem" | "memory" => "M:".into(),
        "gpu" => String::new(),
        other => format!("{other}:"),
    }
}

/// The GPU table's lines for `width` columns (the header first).
pub fn gpu_lines(s: &Snapshot, gpus: &[GpuInfo], width: usize) -> Vec<String> {
    let g = &s.gpus;
    let name = |x: &GpuSample| {
        gpus.iter()
            .find(|i| i.index == x.gpu)
            .map_or(String::new(), |i| i.name.clone())
    };
    let all_temps = |x: &GpuSample| {
        let t: Vec<String> = x
            .temp_c
            .iter()
            .map(|(k, v)| format!("{}{v:.0}", short_label(k)))
            .collect();
        if t.is_empty() {
            "-".into()
        } else {
            t.join(" ")
        }
    };
    let hottest = |x: &GpuSample| opt(x.temp_c.values().copied().reduce(f64::max), "");
    let names: Vec<String> = g.iter().map(name).collect();
    let mut cols = vec![
        Col::new("GPU", g.iter().map(|x| x.gpu.to_string()).collect(), false),
        Col::new("NAME", names.clone(), false),
        Col::new(
            "UTIL",
            g.iter().map(|x| opt(x.util_pct, "%")).collect(),
            true,
        ),
        Col::new(
            "VRAM GiB",
            g.iter()
                .map(|x| format!("{}/{}", gib(x.vram_used_bytes), gib(x.vram_total_bytes)))
                .collect(),
            true,
        ),
        Col::new(
            "POWER",
            g.iter().map(|x| opt(x.power_w, " W")).collect(),
            true,
        ),
        Col::new("TEMP °C", g.iter().map(all_temps).collect(), false),
        Col::new(
            "SCLK",
            g.iter().map(|x| opt(x.sclk_mhz, "")).collect(),
            true,
        ),
        Col::new(
            "MCLK",
            g.iter().map(|x| opt(x.mclk_mhz, "")).collect(),
            true,
        ),
    ];
    // Throttle reasons follow the row where there is room (cut with `…` where there is not).
    let throttle: Vec<String> = g
        .iter()
        .map(|x| match &x.throttle {
            Some(r) if !r.is_empty() => format!(" [{}]", r.join(",")),
            _ => String::new(),
        })
        .collect();
    if total(&cols) > width {
        drop_col(&mut cols, "MCLK");
    }
    if total(&cols) > width {
        shrink(&mut cols, "NAME", width, 12);
    }
    if total(&cols) > width
        && let Some(i) = position(&cols, "TEMP °C")
    {
        cols[i] = Col::new("°C", g.iter().map(hottest).collect(), true);
    }
    for head in ["SCLK", "POWER"] {
        if total(&cols) > width {
            drop_col(&mut cols, head);
        }
    }
    if total(&cols) > width {
        shrink(&mut cols, "NAME", width, 6);
    }
    if total(&cols) > width {
        drop_col(&mut cols, "°C");
    }
    if let Some(i) = position(&cols, "NAME") {
        let w = cols[i].width;
        cols[i].cells = names.iter().map(|n| short_name(n, w)).collect();
    }
    let mut lines = render(&cols, width);
    for (line, t) in lines.iter_mut().skip(1).zip(&throttle) {
        if !t.is_empty() {
            *line = cut(&format!("{line}{t}"), width);
        }
    }
    lines
}

/// The per-process table's lines (`PID USER GPU VRAM [TRIAL] COMMAND`), at most `rows` rows of
/// processes (the largest first on each GPU) and a line saying how many more there are.
pub fn process_lines(procs: Option<&[ProcRow]>, width: usize, rows: usize) -> Vec<String> {
    let Some(procs) = procs else {
        return vec![cut("processes: reading…", width)];
    };
    if procs.is_empty() {
        return vec![cut("no process holds GPU memory", width)];
    }
    let mut sorted: Vec<&ProcRow> = procs.iter().collect();
    sorted.sort_by(|a, b| a.gpu.cmp(&b.gpu).then(b.vram_bytes.cmp(&a.vram_bytes)));
    let shown = if sorted.len() > rows {
        rows.saturating_sub(1)
    } else {
        sorted.len()
    };
    let vram = |b: u64| {
        if b >= 1 << 30 {
            format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
        } else {
            format!("{} MiB", b >> 20)
        }
    };
    let list = &sorted[..shown];
    let mut cols = vec![
        Col::new(
            "PID",
            list.iter().map(|p| p.pid.to_string()).collect(),
            true,
        ),
        Col::new(
            "USER",
            list.iter()
                .map(|p| cut(&p.info.user, 10))
                .map(|u| if u.is_empty() { "-".into() } else { u })
                .collect(),
            false,
        ),
        Col::new(
            "GPU",
            list.iter().map(|p| p.gpu.to_string()).collect(),
            true,
        ),
        Col::new(
            "VRAM",
            list.iter().map(|p| vram(p.vram_bytes)).collect(),
            true,
        ),
    ];
    if procs.iter().any(|p| p.info.trial.is_some()) {
        cols.push(Col::new(
            "TRIAL",
            list.iter()
                .map(|p| {
                    p.info
                        .trial
                        .clone()
                        .map_or(String::new(), |t| format!("▶{t}"))
                })
                .collect(),
            false,
        ));
    }
    let fixed = total(&cols) + 1;
    cols.push(Col::new(
        "COMMAND",
        list.iter().map(|p| p.info.command.clone()).collect(),
        false,
    ));
    if let Some(c) = cols.last_mut() {
        c.width = width.saturating_sub(fixed).max(7);
    }
    let mut lines = render(&cols, width);
    if shown < sorted.len() {
        lines.push(cut(
            &format!(
                "… {}",
                crate::util::text::count(sorted.len() - shown, "more process", "more processes")
            ),
            width,
        ));
    }
    lines
}

/// The whole view in `width` × `height`: GPUs, the host line, processes.
pub fn view(
    s: &Snapshot,
    gpus: &[GpuInfo],
    backend: &str,
    procs: Option<&[ProcRow]>,
    width: usize,
    height: usize,
) -> Vec<String> {
    let mut lines = gpu_lines(s, gpus, width);
    lines.push(cut(
        &format!(
            "host CPU {} RAM {}/{} GiB | {backend} | sample {:.2} ms",
            opt(s.host.cpu_pct, "%"),
            gib(s.host.ram_used_bytes),
            gib(s.host.ram_total_bytes),
            s.cost_us as f64 / 1000.0
        ),
        width,
    ));
    // One blank line, then the processes in the rows left.
    let left = height.saturating_sub(lines.len() + 1);
    if left >= 2 {
        lines.push(String::new());
        lines.extend(process_lines(procs, width, left - 1));
    }
    lines.truncate(height.max(1));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn snapshot(n: u32) -> (Snapshot, Vec<GpuInfo>) {
        let gpus = (0..n)
            .map(|i| GpuSample {
                gpu: i,
                util_pct: Some(100.0),
                vram_used_bytes: Some(34_661_728_256),
                vram_total_bytes: Some(206_141_652_992),
                power_w: Some(612.0),
                temp_c: BTreeMap::from([("junction".into(), 71.0), ("mem".into(), 58.0)]),
                sclk_mhz: Some(2100.0),
                mclk_mhz: Some(1300.0),
                throttle: (i == 1).then(|| vec!["power".to_string()]),
                ..Default::default()
            })
            .collect();
        let info = (0..n)
            .map(|i| GpuInfo {
                index: i,
                name: "AMD Instinct MI300X OAM".into(),
                ..Default::default()
            })
            .collect();
        (
            Snapshot {
                gpus,
                ..Default::default()
            },
            info,
        )
    }

    fn procs() -> Vec<ProcRow> {
        let row = |pid, gpu, gib: u64, trial: Option<&str>| ProcRow {
            pid,
            gpu,
            vram_bytes: gib << 30,
            info: ProcInfo {
                user: "ann".into(),
                command: "python3 pretrain.py --config exp.yaml --lots --of --arguments".into(),
                trial: trial.map(str::to_string),
            },
        };
        vec![
            row(4102, 3, 16, Some("7")),
            row(4101, 0, 32, None),
            row(4103, 0, 40, Some("7")),
        ]
    }

    #[test]
    fn every_line_fits_the_width_and_columns_go_by_priority() {
        let (s, info) = snapshot(8);
        let wide = gpu_lines(&s, &info, 200);
        assert!(wide[0].contains("MCLK") && !wide[0].contains("J:"));
        assert!(wide[1].contains("AMD Instinct MI300X OAM") && wide[1].contains("J:71 M:58"));
        for width in [79, 60, 40, 30] {
            let lines = view(&s, &info, "amdgpu-sysfs", Some(&procs()), width, 23);
            for l in &lines {
                assert!(l.chars().count() <= width, "{width}: {l:?}");
            }
            let headers = lines.iter().filter(|l| l.starts_with("GPU ")).count();
            assert_eq!(headers, 1, "{lines:#?}");
        }
        let at80 = gpu_lines(&s, &info, 79);
        assert!(at80[0].ends_with("SCLK MCLK"), "all of it at 80: {at80:?}");
        assert!(at80[2].ends_with("[power]"), "throttle shown: {at80:?}");
        let at60 = gpu_lines(&s, &info, 60);
        assert!(
            !at60[0].contains("MCLK"),
            "the memory clock goes first: {at60:?}"
        );
        assert!(
            at60[0].contains("SCLK") && at60[0].contains("POWER"),
            "{at60:?}"
        );
        assert!(at60[1].contains("MI300X"), "the model stays: {at60:?}");
        let at40 = gpu_lines(&s, &info, 40);
        assert!(
            !at40[0].contains("SCLK") && at40[0].contains("VRAM"),
            "{at40:?}"
        );
        assert!(at40[1].contains("71"), "the hottest sensor stays: {at40:?}");
    }

    #[test]
    fn the_process_table_lists_pid_user_gpu_vram_command_and_marks_a_trial() {
        let lines = process_lines(Some(&procs()), 79, 10);
        assert!(
            lines[0].starts_with(" PID USER GPU     VRAM TRIAL COMMAND"),
            "{lines:#?}"
        );
        // By GPU, the largest first.
        assert!(
            lines[1].starts_with("4103 ann    0 40.0 GiB ▶7    python3"),
            "{lines:#?}"
        );
        assert!(
            lines[2].starts_with("4101 ann    0 32.0 GiB       python3"),
            "{lines:#?}"
        );
        assert!(lines[3].contains("▶7"), "{lines:#?}");
        assert!(lines.iter().all(|l| l.chars().count() <= 79));
        assert!(lines[1].ends_with('…'), "a long command is cut: {lines:#?}");
        // Too many for the rows left: how many more.
        let few = process_lines(Some(&procs()), 79, 2);
        assert_eq!(few.len(), 3);
        assert_eq!(few[2], "… 2 more processes");
        assert_eq!(
            process_lines(Some(&[]), 79, 5),
            ["no process holds GPU memory"]
        );
    }

    #[test]
    fn the_view_fits_the_height() {
        let (s, info) = snapshot(8);
        let lines = view(&s, &info, "amdgpu-sysfs", Some(&procs()), 79, 12);
        assert!(lines.len() <= 12, "{lines:#?}");
        assert_eq!(lines.iter().filter(|l| l.starts_with("GPU ")).count(), 1);
    }

    #[test]
    fn a_name_loses_the_vendor_words_before_the_model() {
        assert_eq!(
            short_name("AMD Instinct MI300X OAM", 30),
            "AMD Instinct MI300X OAM"
        );
        assert_eq!(
            short_name("AMD Instinct MI300X OAM", 19),
            "Instinct MI300X OAM"
        );
        assert_eq!(short_name("AMD Instinct MI300X OAM", 12), "MI300X OAM");
        assert_eq!(short_name("AMD Instinct MI300X OAM", 6), "MI300X");
        assert_eq!(short_name("AMD Instinct MI300X OAM", 4), "MI3…");
    }
}
