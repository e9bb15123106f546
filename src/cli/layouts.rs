//! `primus-tune layouts [CONFIG] [--gpus N] [--gpu NAME] [--gpus-per-node N] [--json]`: the
//! parallel layouts of an experiment on a world, each legal one with its forecast memory and
//! predicted step, each illegal one with the lint rules it breaks.

use super::{CliError, LoadArgs, display_path, print_json};
use crate::app::views::layouts::{LayoutsRequest, LayoutsView, LegalLayout};
use clap::Args;
use std::collections::BTreeMap;
use std::process::ExitCode;

#[derive(Debug, Args)]
pub struct LayoutsArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    /// The GPU the job runs on (MI300X, MI355X, H200, ...), for the predicted step and the
    /// memory that fits. Default: the GPU this machine reports, else the one the experiment's
    /// path names (configs/MI300X/...).
    #[arg(long)]
    pub gpu: Option<String>,
    /// GPUs a node holds (TP stays within one). Default: $GPUS_PER_NODE, a job's
    /// --gpus-per-node or the GPUs detected here, else 8.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub gpus_per_node: Option<u64>,
    /// Print JSON: the space, every legal layout with its forecasts, every illegal one with
    /// its rules.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &LayoutsArgs) -> Result<ExitCode, CliError> {
    let session = a.load.view_session(None)?;
    let req = LayoutsRequest {
        gpu: a.gpu.clone(),
        gpus_per_node: a.gpus_per_node,
    };
    let view = crate::app::views::layouts::layouts(&session, &req)?;
    if a.json {
        print_json(&serde_json::to_value(&view).map_err(|e| CliError::Failed(e.to_string()))?);
        return Ok(ExitCode::SUCCESS);
    }
    print_header(&view, &display_path(&session.experiment));
    print_legal(&view);
    print_illegal(&view);
    Ok(ExitCode::SUCCESS)
}

fn gib(b: f64) -> f64 {
    b / (1u64 << 30) as f64
}

fn list<T: ToString>(v: &[T]) -> String {
    v.iter().map(T::to_string).collect::<Vec<_>>().join(",")
}

fn print_header(v: &LayoutsView, exp: &str) {
    println!("Parallel layouts — {exp}, {}", v.world_source);
    match (&v.gpu, &v.machine) {
        (Some((name, how)), Some(m)) => println!(
            "GPU: {name} from {how}, {:.0} GiB; links {} ({:.0} GB/s in a node, {:.0} between)",
            v.capacity_bytes.map_or(0.0, gib),
            m.links.source,
            m.links.intra_gbs,
            m.links.inter_gbs
        ),
        _ => println!("GPU: unknown (give --gpu NAME): no predicted step, no fit"),
    }
    let b = &v.bounds;
    let vpp: Vec<String> = b
        .vpp
        .iter()
        .map(|x| x.map_or("-".into(), |n| n.to_string()))
        .collect();
    println!(
        "Space: TP {} · PP {} · VPP {} · CP {} · EP {} · MBS {} ({} GPUs a node)",
        list(&b.tp),
        list(&b.pp),
        vpp.join(","),
        list(&b.cp),
        list(&b.ep),
        list(&b.micro),
        b.gpus_per_node
    );
    for n in &b.notes {
        println!("  {n}");
    }
    println!("Figures: {}", v.basis);
}

fn row(l: &LegalLayout) -> String {
    let mem = l
        .memory_bytes
        .map_or_else(|| "?".into(), |m| format!("{:.1}", gib(m)));
    let fits = match l.fits {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "?",
    };
    let (step, rel, bubble, comm, overhead) = match l.predicted {
        Some(p) => (
            format!("{:.2}", p.step_s),
            l.relative.map_or("?".into(), |r| format!("{r:.2}")),
            format!("{:.0}%", 100.0 * p.bubble_s / p.step_s),
            format!(
                "{:.0}%",
                100.0 * (p.tp_s + p.dp_s + p.p2p_s + p.ep_s + p.cp_s) / p.step_s
            ),
            format!("{:.0}%", 100.0 * p.overhead_s / p.step_s),
        ),
        None => ("?".into(), "?".into(), "?".into(), "?".into(), "?".into()),
    };
    format!(
        "{} {:<27} {:>3} {:>6} {:>4} {:>6} {:>5} {:>6} {:>5} {:>8}",
        if l.current { "*" } else { " " },
        l.label,
        l.dp,
        mem,
        fits,
        step,
        rel,
        bubble,
        comm,
        overhead
    )
}

fn print_legal(v: &LayoutsView) {
    println!();
    println!(
        "Legal: {} of {} (* the experiment's own)",
        v.legal.len(),
        v.legal.len() + v.illegal.len()
    );
    println!(
        "  {:<27} {:>3} {:>6} {:>4} {:>6} {:>5} {:>6} {:>5} {:>8}",
        "layout", "DP", "GiB", "fits", "step s", "x now", "bubble", "comm", "overhead"
    );
    for l in &v.legal {
        println!("{}", row(l));
    }
}

fn print_illegal(v: &LayoutsView) {
    if v.illegal.is_empty() {
        return;
    }
    println!();
    println!("Illegal: {} (the lint rules each breaks)", v.illegal.len());
    let mut why: BTreeMap<&str, &str> = BTreeMap::new();
    for l in &v.illegal {
        let ids: Vec<&str> = l.rules.iter().map(|(id, _)| id.as_str()).collect();
        println!("  {:<27} {}", l.label, ids.join(", "));
        for (id, msg) in &l.rules {
            why.entry(id).or_insert(msg);
        }
    }
    println!();
    println!("Rules (the first layout's message each):");
    for (id, msg) in why {
        println!("  {id}: {msg}");
    }
}
