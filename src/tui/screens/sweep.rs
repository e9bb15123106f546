//! Sweep screen: the knob spaces (and why one does not apply), a running sweep's progress, and
//! the last result ranked with each candidate's verdict.

use super::Move;
use crate::app::AppError;
use crate::domain::study::{StudyRecord, VerdictKind};
use crate::tui::app::{App, Effect, LOG_LINES, Overlay, add_edits, quit_if_done};
use crate::tui::keymap::Action;
use crate::tui::theme::Theme;
use crate::tui::widgets::{column_widths, fit, fit_cells, num, sig, wrapped_rows};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, List, ListItem, ListState, Paragraph, Row, Table};
use std::collections::VecDeque;

/// The Sweep screen: the spaces, a running sweep's progress, the last result.
#[derive(Debug, Clone, Default)]
pub struct State {
    pub selected: usize,
    pub running: bool,
    pub log: VecDeque<String>,
    /// The last finished sweep: study name and record.
    pub result: Option<(String, StudyRecord)>,
    /// The selected space's details are shown (Enter) instead of the last result.
    pub detail: bool,
    /// The parallel layouts on the session's world (the layout space's details), or why not;
    /// None until loaded.
    pub layouts: Option<Result<Box<crate::app::views::layouts::LayoutsView>, String>>,
}

pub fn move_selection(app: &mut App, to: Move) {
    let len = app.config.as_ref().map_or(0, |c| c.spaces.len());
    app.screens.sweep.selected = to.apply(app.screens.sweep.selected, len);
}

pub fn apply(app: &mut App, action: Action) -> Vec<Effect> {
    match action {
        Action::SpaceDetail => {
            let sw = &mut app.screens.sweep;
            sw.detail = !sw.detail;
            let per_world = app
                .config
                .as_ref()
                .and_then(|c| c.spaces.get(sw.selected))
                .is_some_and(|s| s.per_world);
            if sw.detail && per_world && sw.layouts.is_none() {
                app.info("working out the layouts on this world…");
                return vec![Effect::LoadLayouts];
            }
            vec![]
        }
        Action::StartSweep => start(app),
        Action::StopSweep => {
            if app.screens.sweep.running {
                app.info("stopping the sweep (the trial in flight is stopped; resume later)");
                vec![Effect::StopSweep]
            } else {
                vec![]
            }
        }
        Action::ApplySweep => {
            let Some((study, _)) = &app.screens.sweep.result else {
                app.info("no finished sweep yet");
                return vec![];
            };
            let study = study.clone();
            apply_pick(app, &study)
        }
        _ => vec![],
    }
}

/// A study's pick becomes unsaved edits (Sweep and Studies screens), worked out by the app as
/// `recommend --study --apply` works it out: the same companions, the same acknowledgements
/// holding, knobs its profile did not model left out (their verdicts are noise).
pub fn apply_pick(app: &mut App, study: &str) -> Vec<Effect> {
    app.info(format!("working out sweep {study}'s pick…"));
    vec![Effect::PlanPick(study.to_string())]
}

/// What applying the pick writes has been worked out: the edits, or why there are none.
pub fn on_pick(
    app: &mut App,
    study: &str,
    r: Result<crate::app::views::recommend::apply::PickEdits, crate::app::AppError>,
) -> Vec<Effect> {
    let pick = match r {
        Ok(p) => p,
        Err(e) => {
            app.error(format!("nothing applied: {e}"));
            return vec![];
        }
    };
    let left_out = if pick.unmodeled.is_empty() {
        String::new()
    } else {
        format!(
            " (not applied, not modelled: {})",
            pick.unmodeled.join(", ")
        )
    };
    add_edits(
        app,
        pick.edits,
        format!(
            "sweep {study}'s pick is unsaved edits now: d shows the diff, s saves, u undoes{left_out}"
        ),
    )
}

/// A sweep may start now (nothing runs, no unsaved edits); otherwise says why.
pub fn can_start(app: &mut App) -> bool {
    if app.busy() {
        app.info("a trial or a sweep is running (x stops it)");
        return false;
    }
    if !app.pending.is_empty() {
        app.error("save or undo your edits first: a sweep runs the file on disk");
        return false;
    }
    true
}

fn start(app: &mut App) -> Vec<Effect> {
    if !can_start(app) {
        return vec![];
    }
    let Some(row) = app
        .config
        .as_ref()
        .and_then(|c| c.spaces.get(app.screens.sweep.selected))
    else {
        return vec![];
    };
    if let Some(why) = &row.not_applicable {
        let why = why.clone();
        app.error(why);
        return vec![];
    }
    let (space, candidates, per_world) = (row.name.clone(), row.candidates, row.per_world);
    let Some(profile) = app.profile_name().map(str::to_string) else {
        app.error("no launch profile found");
        return vec![];
    };
    let unmodeled = app.profile_caps().map_or_else(Vec::new, |c| {
        crate::app::sweep::unmodeled(c, &row.flags, &row.memory_flags)
    });
    if !unmodeled.is_empty() {
        return ask_demo(app, space, profile, &unmodeled);
    }
    let launch = crate::tui::launch::Launch {
        title: "Start a sweep on GPUs?".into(),
        lines: vec![
            if per_world {
                format!(
                    "Sweep {space} with profile {profile}: the layouts of the trials' world, \
                     each judged by the lint before it launches."
                )
            } else {
                format!(
                    "Sweep {space} with profile {profile}: {} before the legality check.",
                    crate::util::text::count(candidates, "candidate", "candidates")
                )
            },
            format!(
                "Budget: a trial of {} iterations per candidate, up to {} for the leaders; no time \
                 limit (`sweep --budget-minutes` sets one); x stops it, resumable.",
                crate::app::sweep::FIRST_ITERS,
                crate::app::sweep::MAX_ITERS
            ),
        ]
        .into_iter()
        .chain(crate::tui::launch::gpu_lines(app))
        .collect(),
        said: format!("sweeping {space} with {profile} (x stops it)"),
        effect: Effect::StartSweep {
            space,
            profile,
            demo: false,
        },
    };
    crate::tui::launch::ask_or_start(app, launch)
}

/// A space the profile cannot rank: asks whether to sweep it as a labelled demo (`y`), whose
/// pick is not applied.
fn ask_demo(app: &mut App, space: String, profile: String, unmodeled: &[String]) -> Vec<Effect> {
    let stand_in = app.profile_caps().is_some_and(|c| c.stand_in);
    let mut lines = vec![format!(
        "Profile {profile} does not model {}{}: its sweep of {space} would rank noise, not \
         evidence.",
        unmodeled.join(", "),
        if stand_in {
            " (a CPU stand-in: what fits in GPU memory is not its to say)"
        } else {
            ""
        }
    )];
    lines.push(
        "y sweeps it as a demo: its results are labelled so, and its pick is not applied. \
         Choose a profile that runs the real job (]) for evidence."
            .into(),
    );
    app.overlay = Some(Overlay::ConfirmLaunch(Box::new(
        crate::tui::launch::Launch {
            title: "Sweep as a labelled demo?".into(),
            lines,
            said: format!("sweeping {space} with {profile} as a demo (x stops it)"),
            effect: Effect::StartSweep {
                space,
                profile,
                demo: true,
            },
        },
    )));
    vec![]
}

/// The experiment was (re)loaded: layouts worked out for the file as it was are dropped, and
/// worked out again when they are on screen.
pub fn on_config_loaded(app: &mut App) -> Vec<Effect> {
    let sw = &mut app.screens.sweep;
    if sw.layouts.take().is_none() {
        return vec![];
    }
    let shown = app
        .config
        .as_ref()
        .and_then(|c| c.spaces.get(sw.selected))
        .is_some_and(|s| s.per_world);
    if sw.detail && shown {
        vec![Effect::LoadLayouts]
    } else {
        vec![]
    }
}

/// The parallel layouts were worked out (or could not be).
pub fn on_layouts(
    app: &mut App,
    r: Result<Box<crate::app::views::layouts::LayoutsView>, AppError>,
) {
    match &r {
        Ok(v) => app.info(format!(
            "{} legal layouts of {} on {} GPUs (* the experiment's own); r sweeps them",
            v.legal.len(),
            v.legal.len() + v.illegal.len(),
            v.world
        )),
        Err(e) => app.error(format!("no layouts: {e}")),
    }
    app.screens.sweep.layouts = Some(r.map_err(|e| e.to_string()));
}

/// The layouts pane: the legal layouts (forecast memory, predicted step), the illegal ones
/// counted by the rule that rules them out.
fn layouts_table<'a>(
    v: &'a crate::app::views::layouts::LayoutsView,
    theme: &Theme,
    width: u16,
) -> Table<'a> {
    let widths = [
        Constraint::Length(2),
        Constraint::Min(22),
        Constraint::Length(3),
        Constraint::Length(6),
        Constraint::Length(4),
        Constraint::Length(7),
        Constraint::Length(5),
    ];
    let col_w = column_widths(&widths, width.saturating_sub(2));
    let gib = |b: f64| b / (1u64 << 30) as f64;
    let rows: Vec<Row> = v
        .legal
        .iter()
        .map(|l| {
            let texts = vec![
                if l.current { "*" } else { "" }.to_string(),
                l.label.clone(),
                l.dp.to_string(),
                sig(l.memory_bytes.map(gib), ""),
                match l.fits {
                    Some(true) => "yes",
                    Some(false) => "NO",
                    None => "?",
                }
                .to_string(),
                l.predicted
                    .map_or("?".into(), |p| format!("{:.2}", p.step_s)),
                l.relative.map_or("?".into(), |r| format!("{r:.2}")),
            ];
            let style = if l.fits == Some(false) {
                theme.dim()
            } else {
                theme.text()
            };
            Row::new(fit_cells(texts, &col_w).into_iter().map(Cell::from)).style(style)
        })
        .collect();
    let mut by_rule: std::collections::BTreeMap<&str, usize> = Default::default();
    for l in &v.illegal {
        for (id, _) in &l.rules {
            *by_rule.entry(id.as_str()).or_default() += 1;
        }
    }
    let illegal = by_rule
        .iter()
        .map(|(id, n)| format!("{id} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    Table::new(rows, widths)
        .header(
            Row::new(vec!["", "layout", "DP", "GiB", "fits", "step s", "x now"])
                .style(theme.title()),
        )
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(
                    " Layouts on {} GPUs · {} legal of {} · {} · prediction, not measured ",
                    v.world,
                    v.legal.len(),
                    v.legal.len() + v.illegal.len(),
                    v.gpu.as_ref().map_or("GPU unknown", |g| g.0.as_str())
                ))
                .title_bottom(if illegal.is_empty() {
                    " r sweeps them · Enter: back ".to_string()
                } else {
                    format!(" illegal: {illegal} · r sweeps the rest · Enter: back ")
                }),
        )
}

/// A sweep starts: the screen shows its progress.
pub fn running(app: &mut App) {
    app.screens.sweep.running = true;
    app.screens.sweep.log.clear();
}

/// One line of the running sweep's progress.
/// A message of several lines (the sweep's opening: study, evidence, memory model, launch
/// history) is kept as its lines, each shown on its own.
pub fn on_line(app: &mut App, line: String) {
    let log = &mut app.screens.sweep.log;
    for l in line.lines() {
        if log.len() == LOG_LINES {
            log.pop_front();
        }
        log.push_back(l.to_string());
    }
}

/// The sweep ended (or stopped, or could not run).
pub fn on_done(
    app: &mut App,
    r: Result<(String, Option<Box<StudyRecord>>, String), AppError>,
) -> Vec<Effect> {
    app.screens.sweep.running = false;
    match r {
        Ok((study, Some(rec), _)) => {
            app.info(format!(
                "sweep {study} done: a applies its pick (as unsaved edits)"
            ));
            app.screens.sweep.result = Some((study, *rec));
        }
        Ok((study, None, resume)) => {
            app.info(format!("sweep {study} stopped; `{resume}` continues it"))
        }
        Err(e) => app.error(format!("the sweep could not run: {e}")),
    }
    let mut fx = vec![Effect::LoadTrials, Effect::LoadStudies];
    quit_if_done(app, &mut fx);
    fx
}

/// A finished study's candidates with their verdicts and evidence (Sweep and Studies screens;
/// the Studies screen highlights its selected row, drawn with a `TableState`), `width` columns
/// wide with its borders: each cell fitted to the width its column gets ([`column_widths`],
/// [`fit_cells`]), as the Trials table does, so a cut text ends in `…`.
pub fn ranked_table<'a>(study: &str, rec: &'a StudyRecord, theme: &Theme, width: u16) -> Table<'a> {
    let widths = [
        Constraint::Length(3),
        Constraint::Length(13),
        Constraint::Length(9),
        Constraint::Length(11),
        Constraint::Length(4),
        Constraint::Length(7),
        Constraint::Min(10),
    ];
    let col_w = column_widths(&widths, width.saturating_sub(2));
    let rows: Vec<Row> = rec
        .candidates
        .iter()
        .map(|c| {
            let style = match c.verdict {
                VerdictKind::Winner => theme.ok(),
                VerdictKind::Tie | VerdictKind::Slower => theme.text(),
                _ => theme.dim(),
            };
            let ci = match (c.ci_low_ms, c.ci_high_ms) {
                (Some(l), Some(h)) => format!("{l:.0}–{h:.0}"),
                _ => "-".into(),
            };
            let texts = vec![
                format!("{}{}", c.id, if c.baseline { "*" } else { "" }),
                c.verdict.short().to_string(),
                num(c.step_ms, 1, ""),
                ci,
                c.n.to_string(),
                format!(
                    "{}{}",
                    sig(
                        c.peak_memory_bytes.map(|b| b as f64 / (1u64 << 30) as f64),
                        "",
                    ),
                    c.peak_memory_source.map_or("", |k| &k.tag()[..1])
                ),
                format!(
                    "{} · {}",
                    crate::domain::study::settings_compact(&c.overrides, &rec.knobs),
                    c.why
                ),
            ];
            Row::new(fit_cells(texts, &col_w).into_iter().map(Cell::from)).style(style)
        })
        .collect();
    Table::new(rows, widths)
        .header(
            Row::new(vec![
                "id",
                "verdict",
                "ms/batch",
                "95% CI",
                "n",
                "GiB a/d",
                "settings · why",
            ])
            .style(theme.title()),
        )
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(
                    " {study}: {} · {} trials, {:.1} {}-min · * current · a applies the pick ",
                    rec.conclusion_short(),
                    rec.trials,
                    rec.gpu_seconds / 60.0,
                    rec.cost_unit()
                ))
                .title_bottom(format!(
                    " {} · {} {} ",
                    rec.basis_text(),
                    rec.statistic.short(),
                    rec.unit_short()
                )),
        )
        .row_highlight_style(theme.selected())
}

pub fn draw(f: &mut Frame, app: &mut App, theme: &Theme, area: Rect) {
    app.hits.rows = draw_screen(f, app, theme, area);
}

/// Draws the screen; returns where the spaces' rows are (for clicks).
fn draw_screen(
    f: &mut Frame,
    app: &App,
    theme: &Theme,
    area: Rect,
) -> Option<crate::tui::mouse::Rows> {
    let c = app.config.as_ref()?;
    let [left, right] = if area.width >= 100 {
        Layout::horizontal([Constraint::Length(40), Constraint::Min(30)]).areas(area)
    } else {
        let n = c.spaces.len() as u16 + 2;
        Layout::vertical([Constraint::Length(n), Constraint::Min(3)]).areas(area)
    };
    let w = usize::from(left.width.saturating_sub(4));
    let items: Vec<ListItem> = c
        .spaces
        .iter()
        .map(|s| {
            let (mark, style) = match &s.not_applicable {
                None => ("   ", theme.text()),
                Some(_) => ("n/a", theme.dim()),
            };
            ListItem::new(Line::from(vec![
                Span::styled(mark, style),
                Span::styled(
                    fit(
                        &if s.per_world {
                            format!(" {} (per world)", s.name)
                        } else {
                            format!(" {} ({} candidates)", s.name, s.candidates)
                        },
                        w.saturating_sub(3),
                    ),
                    style,
                ),
            ]))
        })
        .collect();
    let profile = app.profile_name().unwrap_or("-");
    let mut state = ListState::default().with_selected(Some(app.screens.sweep.selected));
    f.render_stateful_widget(
        List::new(items)
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(format!(" Spaces · profile {profile} "))
                    .title_bottom(" profile: ←→ on Run "),
            )
            .highlight_style(theme.selected()),
        left,
        &mut state,
    );
    let hit = crate::tui::mouse::Rows {
        tab: super::Tab::Sweep,
        y: left.y + 1,
        height: (c.spaces.len() as u16).min(left.height.saturating_sub(2)),
        offset: state.offset(),
    };
    let selected = c.spaces.get(app.screens.sweep.selected);
    let sw = &app.screens.sweep;
    if sw.detail
        && !sw.running
        && selected.is_some_and(|s| s.per_world)
        && let Some(Ok(v)) = &sw.layouts
    {
        f.render_widget(layouts_table(v, theme, right.width), right);
        return Some(hit);
    }
    if app.screens.sweep.running || app.screens.sweep.result.is_none() || app.screens.sweep.detail {
        let mut lines: Vec<Line> = Vec::new();
        if let Some(s) = selected {
            lines.push(Line::styled(s.description.clone(), theme.title()));
            if let Some(why) = &s.not_applicable {
                lines.push(Line::styled(why.clone(), theme.warn()));
            }
            if app.screens.sweep.detail && s.per_world {
                lines.push(Line::raw(match &app.screens.sweep.layouts {
                    None => "working out the layouts on this world…".to_string(),
                    Some(Err(e)) => e.clone(),
                    Some(Ok(_)) => String::new(),
                }));
            } else if app.screens.sweep.detail {
                lines.push(Line::raw(format!(
                    "space {} · {} before the legality check · profile {profile}",
                    s.name,
                    crate::util::text::count(s.candidates, "candidate", "candidates")
                )));
                lines.push(Line::styled(
                    "Enter: back to the last result · r sweeps it",
                    theme.dim(),
                ));
            }
        }
        if app.screens.sweep.log.is_empty() && !app.screens.sweep.running {
            lines.push(Line::raw(""));
            lines.push(Line::raw(
                "r sweeps it: trials for the candidates that may beat the leader (the rest \
                 predicted slower or out of memory, and said so), until the leader is separated \
                 from the rest by more than the noise.",
            ));
        }
        // The newest log lines that fit below the header, each wrapped whole (a long line,
        // such as the launch history, is read in full, not cut at the pane's edge).
        let iw = usize::from(right.width.saturating_sub(2)).max(1);
        let header: usize = lines.iter().map(|l| wrapped_rows(&l.to_string(), iw)).sum();
        let mut room = usize::from(right.height.saturating_sub(2)).saturating_sub(header);
        let log = &app.screens.sweep.log;
        let mut first = log.len();
        for l in log.iter().rev() {
            let rows = wrapped_rows(l, iw);
            if rows > room {
                break;
            }
            room -= rows;
            first -= 1;
        }
        // A pane too small for even the newest line shows what of it fits.
        if first == log.len() {
            first = first.saturating_sub(1);
        }
        for l in log.iter().skip(first) {
            lines.push(Line::raw(l.clone()));
        }
        let title = if app.screens.sweep.running {
            " Sweep · running "
        } else {
            " Sweep "
        };
        f.render_widget(
            Paragraph::new(lines)
                .wrap(ratatui::widgets::Wrap { trim: false })
                .block(Block::default().borders(Borders::ALL).title(title)),
            right,
        );
        return Some(hit);
    }
    if let Some((study, rec)) = &app.screens.sweep.result {
        f.render_widget(ranked_table(study, rec, theme, right.width), right);
    }
    Some(hit)
}
