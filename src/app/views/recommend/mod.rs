//! Recommendations: measured ones from a finished study (with its evidence), then the guide's
//! rules for the GPU and the framework the job runs on, with the HipBLASLt state the checklist
//! sees. Acknowledged rules are set apart, Primus-on-AMD advice for another target is "does
//! not apply", and what remains is linted together with its companions (what lint would refuse
//! is withheld, with lint's message).

pub mod apply;
mod study;

use crate::app::{AppError, Session};
use crate::config::Experiment;
use crate::config::catalog::Catalog;
use crate::config::diag::Diagnostic;
use crate::domain::advice::Ack;
use crate::domain::study::StudyRecord;
use crate::run::profile::OverrideStyle;
use crate::telemetry::hardware::{self, GpuModel};
use crate::tune::recommend::{
    self, Context, Framework, NotApplicable, Recommendation, Target, Withheld,
};

/// What to recommend from.
#[derive(Debug, Clone, Default)]
pub struct RecommendRequest {
    /// The GPU model by name (MI300X, MI325X, ...); default: this machine's, else the path's.
    pub gpu: Option<String>,
    /// Recommend from this study's measurements.
    pub study: Option<String>,
    /// The launch profile the job runs with: one passing Megatron's `--flag-name`s runs
    /// upstream Megatron-LM (default: Primus, the experiment's own launcher).
    pub profile: Option<String>,
}

/// An acknowledged rule and the recommendations it holds back now.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Acknowledged {
    #[serde(flatten)]
    pub ack: Ack,
    pub flags: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct RecommendView {
    /// The GPU the rules assume, and where that came from.
    pub gpu: Option<(&'static GpuModel, String)>,
    /// The study the measured recommendations come from.
    pub evidence: Option<(String, StudyRecord)>,
    /// Measured first; a rule for a flag a measurement covers is left out.
    pub recs: Vec<Recommendation>,
    /// Flags of the study's pick not recommended from it, and why (its profile does not model
    /// them).
    pub ignored: Vec<(String, String)>,
    /// What the job runs on, and where the framework came from.
    pub target: Target,
    /// Left out because lint would refuse the config with them.
    pub withheld: Vec<Withheld>,
    /// Primus-on-AMD rules that do not apply to the target.
    pub not_applicable: Vec<NotApplicable>,
    /// The experiment's acknowledged rules (each with what it holds back now).
    pub acknowledged: Vec<Acknowledged>,
}

/// The GPU model: as named, else the local GPU (the session's telemetry backend), else the
/// experiment's path (configs/MI300X/...). With the reason.
pub(in crate::app) fn gpu(
    session: &Session,
    name: Option<&str>,
) -> Result<Option<(&'static GpuModel, String)>, AppError> {
    if let Some(name) = name {
        return hardware::lookup(name)
            .map(|g| Some((g, "--gpu".to_string())))
            .ok_or_else(|| {
                let known: Vec<&str> = hardware::table().iter().map(|g| g.name.as_str()).collect();
                AppError::Usage(format!(
                    "--gpu {name}: unknown GPU (known: {}){}",
                    known.join(", "),
                    crate::util::suggest::did_you_mean(name, &known)
                ))
            });
    }
    let local = session.local_gpu.get_or_init(|| {
        let t = session.telemetry.clone().unwrap_or_default();
        let Ok((Some(b), _)) = crate::telemetry::select::open(&t.backend, &t.roots) else {
            return None;
        };
        let g = b.gpus().first().and_then(|g| hardware::lookup(&g.name))?;
        Some((g, format!("this machine ({})", b.name())))
    });
    if let Some(found) = local {
        return Ok(Some(found.clone()));
    }
    let p = session.experiment.to_string_lossy().to_lowercase();
    Ok(hardware::table()
        .iter()
        .find(|g| g.vendor == "amd" && p.contains(&g.name.to_lowercase()))
        .map(|g| (g, "the experiment's path".to_string())))
}

/// The framework the job runs (upstream Megatron-LM for a profile passing Megatron's flags)
/// and the session's load options with the environment its launch sets (the profile's `env:`
/// under the session's `--env`, as [`crate::run::profile::Profile::config_env`] gives it).
fn launch(
    profile: Option<&str>,
    session: &Session,
) -> Result<(Framework, crate::config::LoadOptions), AppError> {
    let Some(name) = profile else {
        return Ok((Framework::Primus, session.load.clone()));
    };
    let p = crate::app::trial::find_profile(Some(name))?;
    let load = session.launched_by(&p).load;
    let fw = match p.overrides {
        OverrideStyle::Megatron => Framework::UpstreamMegatron,
        OverrideStyle::Torchtitan => Framework::UpstreamTorchtitan,
        OverrideStyle::Primus => Framework::Primus,
    };
    Ok((fw, load))
}

/// The GPU the advice is for (and where that came from), what the job runs on, and the load
/// options with the launch's environment: one answer for recommend and the checklist.
pub type Resolved = (
    Option<(&'static GpuModel, String)>,
    Target,
    crate::config::LoadOptions,
);

/// What the job runs on: the GPU as named, else this machine's, else the experiment path's;
/// the framework and launch variables of `profile` (default: Primus).
pub fn target(
    session: &Session,
    gpu_name: Option<&str>,
    profile: Option<&str>,
) -> Result<Resolved, AppError> {
    let gpu = gpu(session, gpu_name)?;
    let (framework, load) = launch(profile, session)?;
    let target = target_on(gpu.as_ref(), framework);
    Ok((gpu, target, load))
}

/// What a Primus job runs on here: this machine's GPU, else the experiment path's (what the
/// checklist uses; no profile, so no launch environment to gather).
pub fn local_target(session: &Session) -> Target {
    let gpu = gpu(session, None).ok().flatten();
    target_on(gpu.as_ref(), Framework::Primus)
}

fn target_on(gpu: Option<&(&'static GpuModel, String)>, framework: Framework) -> Target {
    Target {
        framework,
        vendor: gpu.map(|g| {
            if g.0.vendor == "nvidia" {
                "nvidia"
            } else {
                "amd"
            }
        }),
    }
}

pub fn recommend(session: &Session, req: &RecommendRequest) -> Result<RecommendView, AppError> {
    let (gpu, target, load) = target(session, req.gpu.as_deref(), req.profile.as_deref())?;
    // The experiment as the launch resolves it (its variables may name sizes): what the rules
    // read and what their bundles are checked against. Resolved and linted once here: on a
    // large experiment each costs a good part of a second.
    let exp = Experiment::load(&session.experiment, &load)?;
    let (gemm, acks) = super::facts::stored(session, &exp)?;
    let world = load.world;
    let lint = crate::config::lint::lint(&exp, &load.env, world.as_ref(), Catalog::builtin());
    let (kept, quiet) = crate::app::ack::split(session, lint)?;
    let quiet: Vec<Diagnostic> = quiet.into_iter().map(|s| s.diagnostic).collect();
    let checker = recommend::bundle::Checker::with_found(
        &exp,
        &load,
        Catalog::builtin(),
        kept.iter().chain(&quiet),
    );
    let mut ctx = Context {
        gpu: gpu.as_ref().map(|g| g.0),
        world,
        acked: Vec::new(),
        quiet,
        found: Some(&kept[..]),
    };
    let mut measured = Vec::new();
    let mut evidence = None;
    let mut ignored = Vec::new();
    if let Some(name) = &req.study {
        let (rec, recs, skipped) = study::from_study(session, name)?;
        measured = recs;
        ignored = skipped;
        evidence = Some((name.clone(), rec));
    }
    // What each acknowledged rule holds back: the rules as they would be without it (run
    // only when something is acknowledged).
    let unacked = if acks.is_empty() {
        Vec::new()
    } else {
        recommend::rules(&exp, &load.env, &ctx, &gemm)
    };
    let acknowledged: Vec<Acknowledged> = acks
        .into_iter()
        .map(|ack| Acknowledged {
            flags: unacked
                .iter()
                .filter(|r| r.rule == ack.rule)
                .map(|r| r.flag.clone())
                .collect(),
            ack,
        })
        .collect();
    let acks: Vec<Ack> = acknowledged.iter().map(|a| a.ack.clone()).collect();
    let advice = Advice {
        exp: &exp,
        load: &load,
        gemm: &gemm,
        target,
        acks: &acks,
        checker,
    };
    ctx.acked = acks.iter().map(|a| a.rule.clone()).collect();
    let (recs, withheld, not_applicable) = advice.settle(ctx, measured);
    Ok(RecommendView {
        gpu,
        evidence,
        recs,
        ignored,
        target,
        withheld,
        not_applicable,
        acknowledged,
    })
}

/// What the advice is worked out from, once the study's pick and the acknowledgements are known.
struct Advice<'a> {
    exp: &'a crate::config::Experiment,
    load: &'a crate::config::LoadOptions,
    gemm: &'a crate::gemm::status::GemmStatus,
    target: Target,
    acks: &'a [Ack],
    checker: recommend::bundle::Checker<'a>,
}

type Settled = (Vec<Recommendation>, Vec<Withheld>, Vec<NotApplicable>);

impl Advice<'_> {
    /// The pick and the rules, each linted with its companions, less every bundle that would
    /// set a flag an acknowledgement governs. A bundle held back is treated as acknowledged
    /// and the rest worked out again (what only followed from it goes too: no DeepEP CU count
    /// without the sync-free stage that turns DeepEP on); each round holds back at least one
    /// more rule, so this ends.
    fn settle(&self, mut ctx: Context, mut measured: Vec<Recommendation>) -> Settled {
        let mut held = Vec::new();
        loop {
            let (recs, withheld, not_applicable) = self.round(&ctx, measured.clone());
            let (recs, out, rules) = recommend::hold_back(recs, self.acks);
            if rules.is_empty() {
                return (
                    recs,
                    held.into_iter().chain(withheld).collect(),
                    not_applicable,
                );
            }
            held.extend(out);
            measured.retain(|m| !rules.contains(&m.rule));
            ctx.acked.extend(rules);
        }
    }

    /// One round: the rules (less those for a flag the measurement covers) for the target, and
    /// the pick and the rules linted apart — `--study --apply` writes the pick alone, and
    /// `--apply` without a study the rules alone, each onto the config as it then is.
    fn round(&self, ctx: &Context, measured: Vec<Recommendation>) -> Settled {
        let rules: Vec<Recommendation> = recommend::rules(self.exp, &self.load.env, ctx, self.gemm)
            .into_iter()
            .filter(|r| !measured.iter().any(|m| m.flag == r.flag))
            .collect();
        let (rules, not_applicable) = recommend::target::split(rules, &self.target);
        let pick = self.checker.check(measured);
        let rules = self.checker.check(rules);
        (
            pick.recs.into_iter().chain(rules.recs).collect(),
            pick.withheld.into_iter().chain(rules.withheld).collect(),
            not_applicable,
        )
    }
}
