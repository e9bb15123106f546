//! The interactive frontend: `primus-tune [CONFIG]` on a terminal. State + pure update
//! (`app.rs`, the screens in `screens/`, the key map in `keymap.rs`) + pure view (`widgets.rs`,
//! each screen's `draw`); this file is the one loop that merges keys, resizes, worker messages,
//! telemetry and signals, has `effects.rs` perform what `update` asks for through the app
//! layer, and redraws when something changed (at most ~30 frames/s).
//!
//! The terminal is restored on every way out: normal exit, error, panic (the hook is installed
//! before the terminal is taken), SIGTERM and SIGHUP; a running trial's process group is stopped
//! in each case (the worker handle's Drop covers unwinding).

pub mod app;
pub mod axis;
pub mod backups;
pub mod effects;
pub mod help;
pub mod keymap;
pub mod launch;
pub mod mouse;
pub mod overlay;
pub mod rebind;
pub mod screens;
pub mod scroll;
pub mod theme;
pub mod widgets;

#[cfg(test)]
mod defaults_tests;
#[cfg(test)]
mod layout_tests;
#[cfg(test)]
mod message_tests;
#[cfg(test)]
mod parity_tests;
#[cfg(test)]
mod render_tests;
#[cfg(test)]
mod terminal_tests;
#[cfg(test)]
mod update_tests;

use crate::app::Session;
use crate::run::profile;
use crate::telemetry::host::Host;
use crate::telemetry::sampler::{Sampler, SamplerConfig};
use crate::telemetry::select::{self, Roots};
use app::{App, Effect, Msg};
use crossterm::event::{Event, EventStream};
use effects::{Flow, Runner};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::Stdout;
use std::path::PathBuf;
use std::time::Duration;
use theme::{Palette, Theme};
use tokio::sync::mpsc;

/// What the command line gives the TUI.
#[derive(Debug, Clone)]
pub struct TuiOptions {
    /// The experiment, its environment, workspace and the trials' telemetry.
    pub session: Session,
    /// The live sampler's backend and roots (the trials' come with the session).
    pub telemetry_backend: String,
    pub roots: Roots,
    /// Show the guided tour (first start, unless `--no-tour`).
    pub tour: bool,
    /// Capture the mouse (clicks and the wheel): `--no-mouse`, `PRIMUS_TUNE_NO_MOUSE`, the
    /// defaults file's `[ui] mouse`, else on (resolved by `app::defaults`).
    pub mouse: bool,
    /// Colour (`NO_COLOR`, else the defaults file's `[ui] color`).
    pub color: crate::app::defaults::ColorChoice,
    /// The keys, with the defaults file's `[keys]` applied.
    pub keymap: keymap::Keymap,
    /// `--profile`: the Run screen's profile at start.
    pub profile: Option<String>,
    /// Where the chosen profile is remembered per experiment (None: nowhere).
    pub state_file: Option<PathBuf>,
}

/// Whether this run captures the mouse (set once by [`run`]; read again after Ctrl-Z and `e`).
static MOUSE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Where the TUI writes its log (tracing), never the terminal.
pub fn log_path() -> PathBuf {
    crate::util::bundled::data_dir("logs").join("tui.log")
}

fn init_logging() {
    let path = log_path();
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        let _ = tracing_subscriber::fmt()
            .with_writer(std::sync::Mutex::new(file))
            .with_ansi(false)
            .try_init();
    }
}

type Term = Terminal<CrosstermBackend<Stdout>>;

/// The terminal's size in columns and rows (None when stdout is not a terminal): for the CLI's
/// own live views (`monitor`), as the terminal crates are the TUI's alone.
pub fn terminal_size() -> Option<(u16, u16)> {
    crossterm::terminal::size()
        .ok()
        .filter(|(w, h)| *w > 0 && *h > 0)
}

/// Give the terminal back: mouse capture off, leave the alternate screen, raw mode off, cursor
/// on.
pub fn restore_terminal() {
    use crossterm::{cursor, event, execute, terminal};
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        event::DisableMouseCapture,
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
}

/// Raw mode, the alternate screen and (unless turned off) mouse capture.
fn enter_screen(mouse: bool) -> std::io::Result<()> {
    use crossterm::{event, execute, terminal};
    terminal::enable_raw_mode()?;
    execute!(std::io::stdout(), terminal::EnterAlternateScreen)?;
    if mouse {
        execute!(std::io::stdout(), event::EnableMouseCapture)?;
    }
    Ok(())
}

fn take_terminal(mouse: bool) -> std::io::Result<Term> {
    enter_screen(mouse)?;
    Terminal::new(CrosstermBackend::new(std::io::stdout()))
}

fn mouse_wanted() -> bool {
    MOUSE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Ctrl-Z: the terminal back to the shell, stop (SIGTSTP, as the terminal's own Ctrl-Z would;
/// a running trial has its own process group and goes on), and on `fg` take it again and
/// redraw everything.
fn suspend(term: &mut Term) -> std::io::Result<()> {
    restore_terminal();
    nix::sys::signal::raise(nix::sys::signal::Signal::SIGTSTP).map_err(std::io::Error::from)?;
    enter_screen(mouse_wanted())?;
    term.clear()
}

/// `e` on Flags: the terminal to `$VISUAL` / `$EDITOR` (else `vi`) on `path` at `line`
/// (`+LINE`, which vi, vim, nano, emacs and micro take), then back. Returns what happened.
fn edit(term: &mut Term, path: &std::path::Path, line: u32) -> String {
    let editor = std::env::var("VISUAL")
        .ok()
        .or_else(|| std::env::var("EDITOR").ok())
        .filter(|e| !e.trim().is_empty())
        .unwrap_or_else(|| "vi".into());
    let mut words = editor.split_whitespace();
    let program = words.next().unwrap_or("vi").to_string();
    restore_terminal();
    let status = std::process::Command::new(&program)
        .args(words)
        .arg(format!("+{line}"))
        .arg(path)
        .status();
    let _ = enter_screen(mouse_wanted());
    let _ = term.clear();
    match status {
        Ok(s) if s.success() => format!("back from {program}: the experiment is read again"),
        Ok(s) => format!("{program} ended with {s}: the experiment is read again"),
        Err(e) => format!("could not start {program} ({e}): set $EDITOR"),
    }
}

/// Set to a file path, the TUI writes `{"first_frame_ms": .., "rss_kb": ..}` there once the
/// first frame with the experiment loaded is drawn, and quits (for the start-up benchmark).
pub const FIRST_FRAME_ENV: &str = "PRIMUS_TUNE_FIRST_FRAME_REPORT";

/// Set, the TUI panics right after its first frame: lets a real-terminal test check that a panic
/// restores the terminal and stops a trial (tests/tui_tmux.rs).
pub const PANIC_ENV: &str = "PRIMUS_TUNE_PANIC_AFTER_FIRST_FRAME";

/// The state the TUI starts in: the launch profiles (built-in and the user's) with the one
/// `--profile`, the one remembered for this experiment, the defaults file or the built-in
/// default picks (a remembered one that is gone is passed over with a notice), the keys in
/// force, the tour. An unknown `--profile` is an error.
pub fn start_app(
    opts: &TuiOptions,
    profiles: &[profile::Profile],
) -> Result<App, crate::app::AppError> {
    let mut app = App::new(Vec::new(), profile::DEFAULT_PROFILE, opts.tour);
    app.all_experiments = opts.session.all_experiments;
    app.keymap = opts.keymap.clone();
    app.set_profiles(profiles);
    let remembered = opts.state_file.as_deref().and_then(|f| {
        crate::app::state::remembered_profile(f, &opts.session.experiment).map(|p| (p, f))
    });
    let pick = opts.session.defaults.startup_profile(
        opts.profile.as_deref(),
        remembered.as_ref().map(|(p, f)| (p.as_str(), *f)),
        &app.profiles,
    )?;
    if let Some(i) = app.profiles.iter().position(|p| *p == pick.profile.value) {
        app.profile = i;
    }
    if !pick.notices.is_empty() {
        app.info(format!(
            "{}; profile {} ({})",
            pick.notices.join("; "),
            pick.profile.value,
            pick.profile.origin.text()
        ));
    }
    Ok(app)
}

pub fn run(opts: TuiOptions) -> Result<(), crate::app::AppError> {
    let started = std::time::Instant::now();
    let app = start_app(&opts, &crate::app::trial::profiles())?;
    init_logging();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        previous(info);
    }));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    MOUSE.store(opts.mouse, std::sync::atomic::Ordering::Relaxed);
    let mut term = take_terminal(mouse_wanted())?;
    let result = rt.block_on(event_loop(&mut term, &opts, app, started));
    restore_terminal();
    if opts.tour {
        crate::app::state::mark_tour_shown();
    }
    Ok(result?)
}

async fn event_loop(
    term: &mut Term,
    opts: &TuiOptions,
    mut app: App,
    started: std::time::Instant,
) -> std::io::Result<()> {
    let report = std::env::var_os(FIRST_FRAME_ENV).map(PathBuf::from);
    let theme = Theme::new(Palette::from_env(opts.color));
    let (tx, mut rx) = mpsc::channel::<Msg>(1024);
    let (load_tx, mut load_rx) = mpsc::channel::<(u64, Msg)>(16);
    // Declared after the channels so that, on every way out (return, error, panic unwinding),
    // it is dropped first: its worker handles stop the trial and the sweep, whose last sends
    // fail at once once the receivers are gone.
    let mut runner = Runner {
        session: opts.session.clone(),
        tx: tx.clone(),
        load_tx,
        load_gen: 0,
        loaded_gen: 0,
        saving: false,
        trial: None,
        sweep: None,
        state_file: opts.state_file.clone(),
        remember: Default::default(),
    };
    let mut keys = EventStream::new();
    // Live telemetry, whether or not a trial runs.
    let _sampler = start_sampler(opts, tx.clone());
    let mut pending_fx: Vec<Effect> = vec![Effect::Load(Vec::new()), Effect::LoadTrials];
    let mut frame = tokio::time::interval(Duration::from_millis(33));
    frame.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut disk = tokio::time::interval(Duration::from_secs(1));
    disk.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let [mut term_sig, mut hup_sig, mut quit_sig] = signals()?;
    let mut dirty = true;
    loop {
        log_messages(&mut app);
        let mut more = Vec::new();
        for fx in std::mem::take(&mut pending_fx) {
            match runner.perform(fx, &app) {
                Flow::Quit => return Ok(()),
                Flow::Continue => {}
                Flow::Suspend => {
                    suspend(term)?;
                    dirty = true;
                }
                Flow::Editor(path, line) => {
                    let said = edit(term, &path, line);
                    more.extend(app::update(&mut app, Msg::Note(said)));
                    more.push(Effect::Load(app.pending.clone()));
                    dirty = true;
                }
            }
        }
        if !more.is_empty() {
            pending_fx = more;
            continue;
        }
        tokio::select! {
            ev = keys.next() => match ev {
                Some(Ok(Event::Key(k))) => {
                    pending_fx = app::update(&mut app, Msg::Key(k));
                    // A key clears the last message unless the key set a new one.
                    dirty = true;
                }
                Some(Ok(Event::Mouse(m))) => {
                    pending_fx = app::update(&mut app, Msg::Mouse(m));
                    dirty = true;
                }
                Some(Ok(Event::Resize(..))) => dirty = true,
                Some(Ok(_)) => {}
                Some(Err(_)) | None => pending_fx = app::update(&mut app, Msg::Terminate),
            },
            Some(msg) = rx.recv() => {
                runner.ended(&msg);
                pending_fx = app::update(&mut app, msg);
                dirty = true;
            }
            Some((g, msg)) = load_rx.recv() => {
                if runner.loaded(g) {
                    pending_fx = app::update(&mut app, msg);
                    dirty = true;
                }
            }
            _ = disk.tick() => {
                if let Some(c) = &app.config
                    && !app.disk_changed
                    && runner.settled()
                    && crate::app::views::config::stamp(&runner.session.experiment) != c.stamp
                {
                    pending_fx = app::update(&mut app, Msg::DiskChanged);
                    dirty = true;
                }
            }
            _ = term_sig.recv() => {
                tracing::info!("SIGTERM: stopping");
                pending_fx = app::update(&mut app, Msg::Terminate);
            }
            _ = hup_sig.recv() => {
                tracing::info!("SIGHUP (terminal gone): stopping");
                pending_fx = app::update(&mut app, Msg::Terminate);
            }
            _ = quit_sig.recv() => {
                tracing::info!("SIGQUIT: stopping");
                pending_fx = app::update(&mut app, Msg::Terminate);
            }
            _ = frame.tick() => {
                if dirty {
                    if let Err(e) = term.draw(|f| widgets::draw(f, &mut app, &theme)) {
                        // The terminal went away (SSH drop): stop the trial and leave.
                        tracing::warn!("drawing failed: {e}");
                        return Ok(()); // the receiver drops, then the trial handle stops it
                    }
                    dirty = false;
                    if app.config.is_some() && std::env::var_os(PANIC_ENV).is_some() {
                        panic!("{PANIC_ENV} is set: panicking after the first frame");
                    }
                    if let Some(path) = &report
                        && app.config.is_some()
                    {
                        let rss = crate::util::procfs::status_kb("VmHWM").unwrap_or(0);
                        let text = format!(
                            "{{\"first_frame_ms\": {:.2}, \"rss_kb\": {rss}}}\n",
                            started.elapsed().as_secs_f64() * 1000.0
                        );
                        let _ = std::fs::write(path, text);
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// The messages said since the last call, into the log file (`tui.log`): errors whole, as
/// the error box shows them.
fn log_messages(app: &mut App) {
    for (level, text) in app.unlogged.drain(..) {
        match level {
            app::Level::Error => tracing::error!("{text}"),
            app::Level::Info => tracing::info!("{text}"),
        }
    }
}

/// SIGTERM, SIGHUP and SIGQUIT: each stops the trial and leaves (the terminal is raw, so
/// Ctrl-\ is a key; a `kill -QUIT` would otherwise dump core with the trial's last
/// iterations unstored).
fn signals() -> std::io::Result<[tokio::signal::unix::Signal; 3]> {
    use tokio::signal::unix::{SignalKind, signal};
    Ok([
        signal(SignalKind::terminate())?,
        signal(SignalKind::hangup())?,
        signal(SignalKind::quit())?,
    ])
}

/// The live sampler; its snapshots go to the loop. Kept alive by the caller.
fn start_sampler(opts: &TuiOptions, tx: mpsc::Sender<Msg>) -> Option<Sampler> {
    let (backend, notes) = match select::open(&opts.telemetry_backend, &opts.roots) {
        Ok(x) => x,
        Err(e) => (None, vec![e.to_string()]),
    };
    let note = backend
        .is_none()
        .then(|| format!("no GPU telemetry: {}", notes.join("; ")));
    let (sampler, mut srx) = Sampler::start(
        backend,
        Host::new(&opts.roots.procfs),
        SamplerConfig::default(),
    );
    let _ = tx.try_send(Msg::TelemetryReady {
        gpus: sampler.gpus.clone(),
        backend: sampler.backend.unwrap_or("host").to_string(),
        note,
    });
    tokio::spawn(async move {
        while let Some(s) = srx.recv().await {
            if tx.send(Msg::Telemetry(Box::new(s))).await.is_err() {
                break;
            }
        }
    });
    Some(sampler)
}
