//! Checklist screen: the six steps with status on the left, the selected step's why, flags,
//! problems and actions on the right (stacked when the terminal is narrow). On the GEMM step,
//! `n` runs the next HipBLASLt stage and `u` makes later trials use the tuned GEMMs.

use super::{Move, Tab};
use crate::app::views::compare::show_json;
use crate::checklist::{FindingKind, Status, StepReport};
use crate::config::catalog::Step;
use crate::gemm::status::GemmStatus;
use crate::tui::app::{App, Effect, Overlay};
use crate::tui::keymap::Action;
use crate::tui::theme::Theme;
use crate::tui::widgets::{fit, wrapped_rows};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, List, ListItem, ListState, Paragraph, Wrap};

#[derive(Debug, Clone, Default)]
pub struct State {
    pub selected: usize,
}

pub fn move_selection(app: &mut App, to: Move) {
    let len = app.config.as_ref().map_or(0, |c| c.checklist.steps.len());
    app.screens.checklist.selected = to.apply(app.screens.checklist.selected, len);
}

/// Keeps the selection on a step after the view was rebuilt.
pub fn clamp(app: &mut App) {
    move_selection(app, Move::By(0));
}

/// The step under the cursor.
fn selected_step(app: &App) -> Option<Step> {
    app.config
        .as_ref()
        .and_then(|c| c.checklist.steps.get(app.screens.checklist.selected))
        .map(|s| s.step)
}

pub fn apply(app: &mut App, action: Action) -> Vec<Effect> {
    match action {
        Action::OpenStep => {
            let step = selected_step(app);
            let f = &mut app.screens.flags;
            f.step = step;
            f.query.clear();
            f.selected = 0;
            app.tab = Tab::Flags;
            vec![]
        }
        Action::GemmStage => start_gemm_stage(app),
        Action::ToggleGemmTuned => toggle_gemm_tuned(app),
        Action::Acknowledge => ask_acknowledge(app),
        _ => vec![],
    }
}

/// `n` on the GEMM step: the next HipBLASLt stage as trial(s) with the Run screen's profile. A
/// profile that never calls hipBLASLt is refused by the stage's plan, as `gemm-tune stage`
/// refuses it.
fn start_gemm_stage(app: &mut App) -> Vec<Effect> {
    if selected_step(app) != Some(Step::Gemms) {
        return vec![];
    }
    let Some(st) = app.config.as_ref().and_then(|c| c.gemm.as_ref()) else {
        app.info("HipBLASLt tuning through Primus' hook is for Megatron experiments");
        return vec![];
    };
    let Some(stage) = st.next else {
        app.info("all three GEMM stages are done");
        return vec![];
    };
    let Some(profile) = super::run::launch_profile(app, false) else {
        return vec![];
    };
    if !app.profile_calls_hipblaslt() {
        // The stage plan's own refusal, as `gemm-tune stage` prints it.
        let why = crate::gemm::stage::StageError::NoHipblaslt { stage, profile };
        app.error(why.to_string());
        return vec![];
    }
    let launch = crate::tui::launch::Launch {
        title: format!("Run HipBLASLt stage {stage} on GPUs?"),
        lines: vec![format!(
            "HipBLASLt tuning stage {stage} with profile {profile}: it trains ({}).",
            if stage == 3 {
                "two trials: tuned and untuned"
            } else {
                "one trial"
            }
        )]
        .into_iter()
        .chain(crate::tui::launch::gpu_lines(app))
        .collect(),
        said: format!("GEMM stage {stage} with {profile}"),
        effect: Effect::StartGemmStage { stage, profile },
    };
    crate::tui::launch::ask_or_start(app, launch)
}

/// `a`: the selected step's first open to-do that follows a rule, acknowledged with a reason
/// typed in a box (written to the experiment's `primus-tune.toml`, as `recommend --ack` does).
fn ask_acknowledge(app: &mut App) -> Vec<Effect> {
    let todo = app
        .config
        .as_ref()
        .and_then(|c| c.checklist.steps.get(app.screens.checklist.selected))
        .and_then(StepReport::open_todo)
        .map(|f| (f.rule.unwrap_or_default(), f.text.clone()));
    match todo {
        Some((rule, text)) => {
            app.overlay = Some(Overlay::Acknowledge {
                rule,
                text,
                reason: String::new(),
            });
        }
        None => app.info("this step has no open to-do to acknowledge"),
    }
    vec![]
}

/// `u` on the GEMM step: later trials and sweeps from the TUI train with the tuned file (or stop
/// doing so). Only once stage 2 has produced one.
fn toggle_gemm_tuned(app: &mut App) -> Vec<Effect> {
    if selected_step(app) != Some(Step::Gemms) {
        return vec![];
    }
    let tuned = app
        .config
        .as_ref()
        .and_then(|c| c.gemm.as_ref())
        .is_some_and(|g| g.results.as_ref().is_some_and(|r| r.entries > 0) || g.in_use);
    if !app.gemm_tuned && !tuned {
        app.info("no tuned GEMMs yet: stage 2 writes them (n runs the next stage)");
        return vec![];
    }
    app.gemm_tuned = !app.gemm_tuned;
    app.info(if app.gemm_tuned {
        "trials and sweeps started here now train with the tuned GEMMs (u again: untuned)"
    } else {
        "trials and sweeps started here train with the untuned GEMMs"
    });
    vec![]
}

fn status_style(theme: &Theme, s: Status) -> Style {
    match s {
        Status::Done => theme.ok(),
        Status::NeedsAttention => theme.warn(),
        Status::NotApplicable | Status::NotMeasured | Status::Acknowledged => theme.dim(),
    }
}

fn status_mark(s: Status) -> &'static str {
    match s {
        Status::Done => "[x]",
        Status::NeedsAttention => "[!]",
        Status::NotApplicable => "[-]",
        Status::NotMeasured => "[?]",
        Status::Acknowledged => "[a]",
    }
}

pub fn draw(f: &mut Frame, app: &mut App, theme: &Theme, area: Rect) {
    let Some(c) = &app.config else { return };
    let steps = &c.checklist.steps;
    let narrow = area.width < 70;
    let (left, right) = if narrow {
        let [a, b] = Layout::vertical([
            Constraint::Length(steps.len() as u16 + 2),
            Constraint::Min(3),
        ])
        .areas(area);
        (a, b)
    } else {
        let [a, b] = Layout::horizontal([Constraint::Length(36), Constraint::Min(30)]).areas(area);
        (a, b)
    };
    let items: Vec<ListItem> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let w = left.width.saturating_sub(8) as usize;
            ListItem::new(Line::from(vec![
                Span::styled(status_mark(s.status), status_style(theme, s.status)),
                Span::raw(format!(" {}", fit(&format!("{}. {}", i + 1, s.title), w))),
            ]))
        })
        .collect();
    let mut state = ListState::default().with_selected(Some(app.screens.checklist.selected));
    // The legend of every mark: two lines under the steps where there is room, else the box's
    // bottom border.
    let legend = [
        "[x] done   [!] to do   [-] n/a",
        "[?] unmeasured   [a] acknowledged",
    ];
    let mut block = Block::default()
        .borders(Borders::ALL)
        .title(" Quick checklist ");
    let inner = block.inner(left);
    let below = usize::from(inner.height) >= steps.len() + 1 + legend.len();
    if !below {
        block = block.title_bottom(" [x] done [!] to do [-] n/a [?] unmeasured [a] ack ");
    }
    f.render_stateful_widget(
        List::new(items)
            .block(block)
            .highlight_style(theme.selected()),
        left,
        &mut state,
    );
    app.hits.rows = Some(crate::tui::mouse::Rows {
        tab: Tab::Checklist,
        y: inner.y,
        height: (steps.len() as u16).min(inner.height),
        offset: state.offset(),
    });
    if below {
        let h = legend.len() as u16;
        let area = Rect {
            y: inner.y + inner.height - h,
            height: h,
            ..inner
        };
        let lines: Vec<Line> = legend
            .iter()
            .map(|l| Line::styled(fit(l, inner.width.into()), theme.dim()))
            .collect();
        f.render_widget(Paragraph::new(lines), area);
    }
    if let Some(step) = steps.get(app.screens.checklist.selected) {
        let stages = c
            .gemm
            .as_ref()
            .filter(|_| step.step == Step::Gemms)
            .map(|g| {
                let profile = app.profile_name().unwrap_or("");
                stage_lines(
                    g,
                    profile,
                    app.profile_calls_hipblaslt(),
                    app.gemm_tuned,
                    theme,
                )
            })
            .unwrap_or_default();
        draw_step(f, step, stages, theme, right);
    }
}

/// The GEMM step's three stages, one line each, and the key that runs the next.
fn stage_lines(
    g: &GemmStatus,
    profile: &str,
    calls_hipblaslt: bool,
    tuned_on: bool,
    theme: &Theme,
) -> Vec<Line<'static>> {
    let mark = |done: bool| {
        if done {
            Span::styled("[x] ", theme.ok())
        } else {
            Span::styled("[ ] ", theme.dim())
        }
    };
    let mut out = vec![Line::styled("Stages", theme.title())];
    let one = match g.dumps.as_ref().filter(|d| d.gemm_lines > 0) {
        Some(d) => format!(
            "1 shapes: {} unique in {}",
            d.unique_shapes,
            crate::util::text::count(d.gemm_lines as usize, "call", "calls")
        ),
        None => "1 shapes: not dumped".to_string(),
    };
    out.push(Line::from(vec![mark(g.done >= 1), Span::raw(one)]));
    let two = match &g.results {
        Some(r) => format!(
            "2 tuned: {} GEMMs, hipBLASLt {}{}",
            r.entries,
            r.git_version,
            r.covered
                .zip(g.dumps.as_ref())
                .map(|(c, d)| format!(", {c}/{} shapes", d.unique_shapes))
                .unwrap_or_default()
        ),
        None => "2 tuned: no result file".to_string(),
    };
    out.push(Line::from(vec![mark(g.done >= 2), Span::raw(two)]));
    let three = match &g.comparison {
        Some(c) => format!(
            "3 measured: {:+.1} ± {:.1} % step time (trials {} vs {})",
            100.0 * c.change,
            100.0 * c.change_ci,
            c.baseline_trial,
            c.tuned_trial
        ),
        None if g.in_use => "3 on in this environment (not measured)".to_string(),
        None => "3 tuned vs untuned: not measured".to_string(),
    };
    out.push(Line::from(vec![mark(g.done >= 3), Span::raw(three)]));
    if g.results.as_ref().is_some_and(|r| r.entries > 0) || g.in_use {
        out.push(Line::from(vec![
            Span::styled("u", theme.title()),
            Span::raw(format!(
                " trials and sweeps from here use the tuned GEMMs: {}",
                if tuned_on { "on" } else { "off" }
            )),
        ]));
    }
    if let Some(n) = g.next {
        let how = if !calls_hipblaslt {
            format!(
                " runs stage {n} once the Run screen's profile is primus or megatron ([ ] there)"
            )
        } else {
            format!(" runs stage {n} with {profile} (the Run screen's profile)")
        };
        out.push(Line::from(vec![
            Span::styled("n", theme.title()),
            Span::raw(how),
        ]));
    }
    out
}

fn draw_step(f: &mut Frame, s: &StepReport, stages: Vec<Line<'static>>, theme: &Theme, area: Rect) {
    let mut lines: Vec<Line> = Vec::new();
    lines.push(Line::from(vec![
        Span::styled(s.title, theme.title()),
        Span::raw(" — "),
        Span::styled(s.status.label(), status_style(theme, s.status)),
    ]));
    for p in &s.problems {
        lines.push(Line::styled(
            format!("{} {}", p.severity.label(), p.message),
            if p.severity == crate::config::diag::Severity::Error {
                theme.error()
            } else {
                theme.warn()
            },
        ));
    }
    // On the GEMM step the Stages block says what is done; the step's own "ok" lines would
    // repeat it.
    let has_stages = !stages.is_empty();
    for finding in s
        .findings
        .iter()
        .filter(|x| !(has_stages && x.kind == FindingKind::Ok))
    {
        let (mark, style) = match finding.kind {
            FindingKind::Ok => ("ok ", theme.ok()),
            FindingKind::Todo => ("to do ", theme.warn()),
            FindingKind::Info => ("· ", theme.dim()),
            FindingKind::Acknowledged => ("ack ", theme.dim()),
        };
        lines.push(Line::from(vec![
            Span::styled(mark, style),
            Span::raw(finding.text.clone()),
        ]));
    }
    lines.extend(stages);
    if !s.actions.is_empty() {
        lines.push(Line::styled("Next", theme.title()));
        for a in &s.actions {
            lines.push(Line::raw(format!("  {a}")));
        }
    }
    // The why and what next wrap; the flags below take one line each and what is left.
    let block = Block::default().borders(Borders::ALL);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let w = usize::from(inner.width.max(1));
    let text_rows: usize = lines
        .iter()
        .map(|l| {
            let text: String = l.spans.iter().map(|s| s.content.as_ref()).collect();
            wrapped_rows(&text, w)
        })
        .sum();
    let [top, bottom] =
        Layout::vertical([Constraint::Length(text_rows as u16), Constraint::Min(0)]).areas(inner);
    f.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), top);
    if s.flags.is_empty() || bottom.height < 2 {
        return;
    }
    let room = usize::from(bottom.height) - 1;
    let mut flags = vec![Line::styled(
        format!("Flags ({}; Enter edits them)", s.flags.len()),
        theme.title(),
    )];
    let shown = if s.flags.len() > room {
        room.saturating_sub(1)
    } else {
        s.flags.len()
    };
    for fl in s.flags.iter().take(shown) {
        let head = format!("  {} = {}", fl.name, show_json(&fl.value));
        let head = fit(&head, w);
        let rest = w.saturating_sub(head.chars().count() + 2);
        lines_push_flag(&mut flags, head, fit(&fl.source, rest), theme);
    }
    if shown < s.flags.len() {
        flags.push(Line::styled(
            format!("  … {} more on the Flags screen", s.flags.len() - shown),
            theme.dim(),
        ));
    }
    f.render_widget(Paragraph::new(flags), bottom);
}

fn lines_push_flag(out: &mut Vec<Line<'static>>, head: String, source: String, theme: &Theme) {
    out.push(Line::from(vec![
        Span::raw(head),
        Span::styled(format!("  {source}"), theme.dim()),
    ]));
}
