//! Studies screen: the experiment's sweeps (space, status, trials, GPU time, pick, started).
//! Enter opens one ranked with its verdicts (↑↓ select a candidate, shown whole below the
//! table: its settings, why, and the evidence), `l` its search's decision log, `r` resumes an
//! unfinished one, `p` writes its report, `a` applies its pick as unsaved edits.

use super::{Move, Tab, sweep};
use crate::app::AppError;
use crate::app::views::studies::{StudyDetail, StudyStatus, StudySummary};
use crate::domain::evidence::Basis;
use crate::domain::study::{CandidateRecord, StudyRecord, settings};
use crate::tui::app::{App, Effect};
use crate::tui::keymap::Action;
use crate::tui::theme::Theme;
use crate::tui::widgets::{column_widths, fit, fit_num, wrapped_rows};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};

#[derive(Debug, Clone, Default)]
pub struct State {
    pub rows: Vec<StudySummary>,
    pub selected: usize,
    pub error: Option<String>,
    /// The study opened with Enter (its ranked candidates).
    pub open: Option<StudyDetail>,
    /// The open study's decision log is shown instead of its ranking, from this line on.
    pub log_from: Option<usize>,
    /// The candidate selected in the open study's ranking (an index into its candidates).
    pub candidate: usize,
    /// The candidate pane's rows at a width, (width, rows): the longest candidate's lines
    /// wrapped, worked out once per study and width rather than on every frame.
    pub pane_rows: Option<(u16, usize)>,
    /// `l` on the list asked for the study: its log opens when it arrives.
    pub log_wanted: bool,
}

impl State {
    pub fn selected(&self) -> Option<&StudySummary> {
        self.rows.get(self.selected)
    }
}

pub fn move_selection(app: &mut App, to: Move) {
    let st = &mut app.screens.studies;
    match (&st.open, st.log_from) {
        (None, _) => st.selected = to.apply(st.selected, st.rows.len()),
        (Some(d), Some(from)) => {
            let n = d.record.as_ref().map_or(0, |r| r.log.len());
            st.log_from = Some(to.apply(from, n));
        }
        (Some(d), None) => {
            let n = d.record.as_ref().map_or(0, |r| r.candidates.len());
            st.candidate = to.apply(st.candidate, n);
        }
    }
}

/// The footer's hint for `action` where the open study changes what a key does: `None` keeps
/// the key table's, `Some(None)` hides it. With a study open, Enter goes back to the list;
/// in its decision log ↑↓ scroll and `l` returns to the ranking, in its ranking ↑↓ select a
/// candidate (the pane below says so) and `l` opens the log.
pub fn hint(app: &App, action: Action) -> Option<Option<&'static str>> {
    let st = &app.screens.studies;
    let d = st.open.as_ref()?;
    let log = st.log_from.is_some();
    match action {
        Action::Up | Action::Down if log => Some(Some("scroll")),
        // the candidate pane's title says ↑↓ (the footer has no room at 80 columns)
        Action::Up | Action::Down => Some(None),
        Action::OpenStudy => Some(Some("back")),
        Action::StudyLog if log => Some(Some("ranking")),
        Action::StudyLog => Some(d.record.is_some().then_some("decision log")),
        _ => None,
    }
}

pub fn on_list(app: &mut App, r: Result<Vec<StudySummary>, AppError>) {
    let st = &mut app.screens.studies;
    super::rows_arrived(&mut st.rows, &mut st.selected, &mut st.error, r);
}

pub fn on_detail(app: &mut App, r: Result<Box<StudyDetail>, AppError>) {
    match r {
        Ok(d) => {
            let st = &mut app.screens.studies;
            st.log_from = std::mem::take(&mut st.log_wanted).then_some(0);
            st.candidate = 0;
            st.pane_rows = None;
            st.open = Some(*d);
        }
        Err(e) => {
            app.screens.studies.log_wanted = false;
            app.error(e.to_string());
        }
    }
}

pub fn apply(app: &mut App, action: Action) -> Vec<Effect> {
    let Some(s) = app.screens.studies.selected().cloned() else {
        app.info("no study yet: the Sweep screen (5) starts one");
        return vec![];
    };
    match action {
        Action::OpenStudy => {
            app.screens.studies.log_from = None;
            if app.screens.studies.open.take().is_some() {
                return vec![];
            }
            vec![Effect::LoadStudy(s.name)]
        }
        Action::StudyLog => {
            let st = &mut app.screens.studies;
            match &st.open {
                Some(d) if d.record.is_none() => {
                    let name = d.summary.name.clone();
                    app.info(format!("{name} has no decision log yet: r resumes it"));
                    vec![]
                }
                Some(_) => {
                    st.log_from = if st.log_from.is_some() { None } else { Some(0) };
                    vec![]
                }
                None => {
                    st.log_wanted = true;
                    vec![Effect::LoadStudy(s.name)]
                }
            }
        }
        Action::ResumeStudy => match s.status {
            StudyStatus::Finished => {
                app.info(format!("study {} is finished: p writes its report", s.name));
                vec![]
            }
            StudyStatus::Running => {
                app.info(format!("study {} has a trial running", s.name));
                vec![]
            }
            StudyStatus::Unfinished | StudyStatus::Incomplete => {
                if !sweep::can_start(app) {
                    return vec![];
                }
                sweep::running(app);
                app.tab = Tab::Sweep;
                app.info(format!("resuming study {} (x stops it)", s.name));
                vec![Effect::ResumeSweep { study: s.name }]
            }
        },
        Action::ReportStudy => {
            if matches!(s.status, StudyStatus::Finished | StudyStatus::Incomplete) {
                app.info(format!("writing the report of {}…", s.name));
                vec![Effect::WriteReport(s.name)]
            } else {
                app.info(format!(
                    "study {} has no result yet: r resumes it, then p writes its report",
                    s.name
                ));
                vec![]
            }
        }
        Action::ApplyStudy => sweep::apply_pick(app, &s.name),
        _ => vec![],
    }
}

/// A study's decision log from line `from` on, each line wrapped whole.
fn draw_log(f: &mut Frame, name: &str, rec: &StudyRecord, from: usize, theme: &Theme, area: Rect) {
    let n = rec.log.len();
    let lines: Vec<Line> = if n == 0 {
        vec![Line::styled("(the search logged nothing)", theme.dim())]
    } else {
        rec.log
            .iter()
            .skip(from)
            .map(|l| Line::raw(l.as_str()))
            .collect()
    };
    // The keys at the bottom: a study's name can fill the top.
    let keys = format!(
        " line {} of {n} · ↑↓ PgUp PgDn scroll · l ranking · Enter back ",
        (from + 1).min(n)
    );
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(" {name}: decision log "))
                .title_bottom(keys),
        ),
        area,
    );
}

/// The selected candidate in full, for the pane below the ranking: its verdict and settings,
/// why, and what it was measured or forecast at.
fn candidate_lines<'a>(rec: &StudyRecord, c: &CandidateRecord, theme: &Theme) -> Vec<Line<'a>> {
    let gib = |b: f64| b / (1u64 << 30) as f64;
    let mut evidence = Vec::new();
    if let Some(ms) = c.step_ms {
        let ci = match (c.ci_low_ms, c.ci_high_ms) {
            (Some(l), Some(h)) => format!(", 95 % CI {l:.1}–{h:.1}"),
            _ => String::new(),
        };
        evidence.push(format!(
            "{} {ms:.1} {}{ci}, n {}",
            rec.statistic.name(),
            rec.unit_short(),
            c.n
        ));
    }
    if let Some(b) = c.peak_memory_bytes {
        evidence.push(format!(
            "peak {:.2} GiB{}",
            gib(b as f64),
            c.peak_memory_source
                .map_or(String::new(), |k| format!(", {}", k.label()))
        ));
    }
    if let Some(b) = c.predicted_bytes {
        evidence.push(format!("memory model {:.2} GiB (a forecast)", gib(b)));
    }
    let mut lines = vec![
        Line::styled(
            format!(
                "#{} {}{} · {}",
                c.id,
                c.verdict.as_str(),
                if c.baseline {
                    " · the current settings"
                } else {
                    ""
                },
                settings(&c.overrides)
            ),
            theme.title(),
        ),
        Line::raw(format!("why: {}", c.why)),
    ];
    if !evidence.is_empty() {
        lines.push(Line::raw(evidence.join(" · ")));
    }
    lines
}

/// The rows the candidate pane needs at `width` (its borders included in the width): the
/// longest candidate's lines wrapped, so the pane does not jump as the selection moves.
fn pane_rows(rec: &StudyRecord, theme: &Theme, width: u16) -> usize {
    let iw = usize::from(width.saturating_sub(2)).max(1);
    rec.candidates
        .iter()
        .map(|c| {
            candidate_lines(rec, c, theme)
                .iter()
                .map(|l| wrapped_rows(&l.to_string(), iw))
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0)
}

/// The open study's ranking with its selected candidate; below it, in a pane of `rows` rows
/// ([`pane_rows`]) when there is room, that candidate whole (at 80 columns the table cuts its
/// settings and why). The table keeps 6 rows or more (a header and 3 candidates); too short
/// a screen shows the table alone.
fn draw_ranking(
    f: &mut Frame,
    name: &str,
    rec: &StudyRecord,
    (selected, rows): (usize, usize),
    theme: &Theme,
    area: Rect,
) -> Option<crate::tui::mouse::Rows> {
    let selected = selected.min(rec.candidates.len().saturating_sub(1));
    let lines = rec
        .candidates
        .get(selected)
        .map(|c| candidate_lines(rec, c, theme))
        .unwrap_or_default();
    let room = area.height.saturating_sub(6 + 2);
    let (table_area, detail) = if area.height >= 14 && !lines.is_empty() {
        let h = (rows as u16).min(room) + 2;
        let [t, d] = Layout::vertical([Constraint::Min(6), Constraint::Length(h)]).areas::<2>(area);
        (t, Some(d))
    } else {
        (area, None)
    };
    let mut state =
        TableState::default().with_selected((!rec.candidates.is_empty()).then_some(selected));
    f.render_stateful_widget(
        sweep::ranked_table(name, rec, theme, table_area.width),
        table_area,
        &mut state,
    );
    if let Some(d) = detail {
        f.render_widget(
            Paragraph::new(lines).wrap(Wrap { trim: false }).block(
                Block::default().borders(Borders::ALL).title(format!(
                    " candidate {} of {} · ↑↓ ",
                    selected + 1,
                    rec.candidates.len()
                )),
            ),
            d,
        );
    }
    Some(crate::tui::mouse::Rows {
        tab: super::Tab::Studies,
        y: table_area.y + 2,
        height: table_area.height.saturating_sub(3),
        offset: state.offset(),
    })
}

pub fn draw(f: &mut Frame, app: &mut App, theme: &Theme, area: Rect) {
    let st = &mut app.screens.studies;
    if let Some(rec) = st.open.as_ref().and_then(|d| d.record.as_ref())
        && st.pane_rows.is_none_or(|(w, _)| w != area.width)
    {
        st.pane_rows = Some((area.width, pane_rows(rec, theme, area.width)));
    }
    let st = &app.screens.studies;
    if let Some(d) = &st.open {
        match (&d.record, st.log_from) {
            (Some(rec), Some(from)) => draw_log(f, &d.summary.name, rec, from, theme, area),
            (Some(rec), None) => {
                let rows = st.pane_rows.map_or(0, |(_, r)| r);
                let hit = draw_ranking(f, &d.summary.name, rec, (st.candidate, rows), theme, area);
                app.page = hit.map_or(1, |h| usize::from(h.height.max(1)));
                app.hits.rows = hit;
            }
            (None, _) => f.render_widget(
                Paragraph::new(format!(
                    "{} is {} after {} ({:.1} {}-min): r resumes it. Enter goes back.",
                    d.summary.name,
                    d.summary.status.as_str(),
                    crate::util::text::count(d.summary.trials as usize, "trial", "trials"),
                    d.summary.gpu_seconds / 60.0,
                    d.summary.cost_unit
                ))
                .wrap(Wrap { trim: true })
                .block(
                    Block::default()
                        .borders(Borders::ALL)
                        .title(format!(" {} ", d.summary.name)),
                ),
                area,
            ),
        }
        return;
    }
    draw_list(f, app, theme, area);
}

/// The list's columns at `width` (the table's): constraints and header. At 120 columns and
/// more a study's name gets more room, its basis its profile, and its start shows.
fn columns(width: u16, unit: Option<&str>) -> (Vec<Constraint>, Vec<&'static str>) {
    use Constraint::{Fill, Length, Min};
    let wide = width >= 120;
    // Below 80 columns the name, the space and the pick share what the others leave.
    let (name, space, basis, pick) = match width {
        120.. => (Length(32), Length(16), Length(18), Min(8)),
        80.. => (Length(16), Length(10), Length(5), Min(8)),
        _ => (Fill(2), Fill(1), Length(5), Fill(1)),
    };
    let mut widths = vec![
        name,
        space,
        Length(10),
        Length(6),
        Length(if unit.is_none() { 9 } else { 7 }),
        basis,
        pick,
    ];
    let cost = match unit {
        None => "minutes",
        Some("CPU") => "CPU-min",
        Some(_) => "GPU-min",
    };
    let mut header = vec!["study", "space", "status", "trials", cost, "basis", "pick"];
    if wide {
        widths.push(Length(19));
        header.push("started");
    }
    (widths, header)
}

/// What a study's figures are, in five columns: `GPU` (measured on one), `proxy` (a CPU
/// stand-in), `rule`, `model` (predicted); with its profile where there is room; `-` before
/// its search has ended (the open study says it whole).
fn basis_text(s: &StudySummary, wide: bool) -> String {
    let Some(b) = &s.basis else {
        return "-".into();
    };
    let short = match b {
        Basis::Measured { .. } => "GPU",
        Basis::Proxy { .. } => "proxy",
        Basis::Rule { .. } => "rule",
        Basis::Predicted { .. } => "model",
    };
    match (&s.profile, wide) {
        (Some(p), true) => format!("{short} {p}"),
        _ => short.into(),
    }
}

/// The study list: each cell cut to the width its column gets ([`column_widths`]), text with
/// `…`, figures shortened, so a long name never runs on silently at any width.
fn draw_list(f: &mut Frame, app: &mut App, theme: &Theme, area: Rect) {
    let st = &app.screens.studies;
    app.page = area.height.saturating_sub(3) as usize;
    let wide = area.width >= 120;
    // Each study's cost in its own unit: GPU-minutes, or a CPU stand-in's CPU-minutes; the
    // header says it when all share one, else each cell does.
    let first = st.rows.first().map_or("GPU", |s| s.cost_unit);
    let mixed = st.rows.iter().any(|s| s.cost_unit != first);
    let (widths, header) = columns(area.width, (!mixed).then_some(first));
    let col_w = column_widths(&widths, area.width.saturating_sub(2));
    let rows: Vec<Row> = st
        .rows
        .iter()
        .map(|s| {
            let style = match s.status {
                StudyStatus::Finished => theme.ok(),
                StudyStatus::Running | StudyStatus::Incomplete => theme.warn(),
                StudyStatus::Unfinished => theme.dim(),
            };
            let minutes = s.gpu_seconds / 60.0;
            let mut texts = vec![
                s.name.clone(),
                s.space.clone(),
                s.status.as_str().to_string(),
                s.trials.to_string(),
                if mixed {
                    format!("{minutes:.1} {}", s.cost_unit)
                } else {
                    format!("{minutes:.1}")
                },
                basis_text(s, wide),
                s.pick.as_ref().map_or("-".into(), settings),
            ];
            if wide {
                texts.push(s.started.get(..19).unwrap_or(&s.started).replace('T', " "));
            }
            Row::new(texts.into_iter().enumerate().map(|(i, t)| {
                let w = usize::from(col_w.get(i).copied().unwrap_or(u16::MAX));
                match i {
                    2 => Cell::from(Span::styled(fit(&t, w), style)),
                    // The trials and the minutes: figures, shortened rather than cut.
                    3 | 4 => Cell::from(fit_num(&t, w)),
                    _ => Cell::from(fit(&t, w)),
                }
            }))
        })
        .collect();
    let n = rows.len();
    let table = Table::new(rows, widths)
        .header(Row::new(header).style(theme.title()))
        .block(Block::default().borders(Borders::ALL).title(format!(
            " Studies · {n} of {} · A: {} · l: decision log ",
            if app.all_experiments {
                "every experiment"
            } else {
                "this experiment"
            },
            if app.all_experiments {
                "this one"
            } else {
                "all"
            }
        )))
        .row_highlight_style(theme.selected());
    let mut state = TableState::default().with_selected((n > 0).then_some(st.selected));
    f.render_stateful_widget(table, area, &mut state);
    app.hits.rows = Some(crate::tui::mouse::Rows {
        tab: super::Tab::Studies,
        y: area.y + 2,
        height: area.height.saturating_sub(3),
        offset: state.offset(),
    });
    if n == 0 {
        let msg = st.error.clone().unwrap_or_else(|| {
            "No studies yet: the Sweep screen (5) starts one; they are kept in the experiment's workspace.".into()
        });
        let inner = Rect {
            x: area.x + 2,
            y: area.y + 2,
            width: area.width.saturating_sub(4),
            height: area.height.saturating_sub(3).min(2),
        };
        f.render_widget(
            Paragraph::new(msg)
                .style(theme.dim())
                .wrap(Wrap { trim: true }),
            inner,
        );
    }
}
