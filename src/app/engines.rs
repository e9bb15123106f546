//! What the frontends (the command line and the TUI, the binary's own) may name of the
//! engines, item by item. The engines are crate-private (public only with the `testkit`
//! feature, for the integration tests and benchmarks), so this list is the whole of what a
//! frontend reaches below `app`: a new edge from a frontend into an engine is a line here, seen
//! in review, and an engine's other items stay free to change.
//!
//! The paths mirror the engines' own (`engines::config::edit::plan` is `config::edit::plan`):
//! the binary names these modules at its root, so its code reads `crate::config::...` as the
//! library's does. Most of this is read-model data (a trial row, a GPU sample, a diagnostic) the
//! screens print; the use cases themselves are `app`'s.

pub mod checklist {
    pub use crate::checklist::{FindingKind, Status, StepReport};
}

pub mod config {
    pub use crate::config::{ConfigError, Experiment, LoadOptions};
    pub mod catalog {
        pub use crate::config::catalog::{Backend, Catalog, Flag, FlagType, Step};
    }
    pub mod diag {
        pub use crate::config::diag::{Diagnostic, Severity, counts};
    }
    pub mod doc {
        pub use crate::config::doc::{EditError, EditKind, SaveOptions};
    }
    pub mod edit {
        pub use crate::config::edit::{SetError, SetRequest, plan};
    }
    pub mod lint {
        pub use crate::config::lint::closest_key;
    }
    pub mod literal {
        pub use crate::config::literal::render;
    }
    pub mod megatron_defaults {
        pub use crate::config::megatron_defaults::{Unset, unset};
    }
    pub mod overrides {
        pub use crate::config::overrides::parse_assignment;
    }
    pub mod patches {
        pub use crate::config::patches::Patched;
    }
    pub mod resolve {
        pub use crate::config::resolve::Module;
    }
    pub mod source {
        pub use crate::config::source::{named_json, origin_json};
    }
    pub mod suppress {
        pub use crate::config::suppress::{Suppressed, Suppression, place};
    }
    pub mod tree {
        pub use crate::config::tree::{Item, Leaf, file_name};
    }
}

pub mod gemm {
    pub mod dump {
        pub use crate::gemm::dump::{DumpError, DumpSummary, GemmShape, read_dumps, shapes_json};
    }
    pub mod probe {
        pub use crate::gemm::probe::{find_bench, probe};
    }
    pub mod results {
        pub use crate::gemm::results::{read, results_json};
    }
    pub mod runner {
        pub use crate::gemm::runner::measured_rate;
    }
    pub mod stage {
        pub use crate::gemm::stage::{StageError, comparison_text};
    }
    pub mod status {
        pub use crate::gemm::status::{GemmStatus, Level, RESULT_FILE, TuneLayout, of_experiment};
    }
}

pub mod megatron {
    pub use crate::megatron::World;
}

pub mod proxy {
    pub use crate::proxy::run_resolved_file;
}

pub mod report {
    pub use crate::report::Written;
    pub mod charts {
        pub use crate::report::charts::ChartOptions;
    }
}

pub mod run {
    pub mod capabilities {
        pub use crate::run::capabilities::{Capabilities, LaunchKind};
    }
    pub mod failure {
        pub use crate::run::failure::FailureDetector;
    }
    pub mod logparse {
        pub use crate::run::logparse::LogParser;
    }
    pub mod process {
        pub use crate::run::process::{Stream, stop_signal};
    }
    pub mod profile {
        pub use crate::run::profile::{DEFAULT_PROFILE, Profile, ProfileError, find};
    }
    pub mod steady {
        pub use crate::run::steady::SteadyConfig;
    }
    pub mod supervise {
        pub use crate::run::supervise::{SUBCOMMAND, mark_main_binary, run};
    }
    pub mod trial {
        pub use crate::run::trial::{TelemetrySetup, TrialEvent, trial_params, trial_settings};
        pub mod materialise {
            pub use crate::run::trial::materialise::TRIAL_ID_ENV;
        }
    }
}

pub mod store {
    pub use crate::store::{Store, StoreError, TrialFilter, TrialRow, TrialStatus};
}

pub mod telemetry {
    pub use crate::telemetry::{GpuInfo, GpuSample, ProcessSample};
    pub mod hardware {
        pub use crate::telemetry::hardware::lookup;
    }
    pub mod host {
        pub use crate::telemetry::host::Host;
    }
    pub mod sampler {
        pub use crate::telemetry::sampler::{
            Collector, History, Sampler, SamplerConfig, Snapshot, Ticker,
        };
    }
    pub mod select {
        pub use crate::telemetry::select::{Roots, known, open};
    }
}

pub mod tune {
    pub mod recommend {
        pub use crate::tune::recommend::Recommendation;
        pub mod bundle {
            pub use crate::tune::recommend::bundle::{as_text, as_yaml};
        }
    }
    pub mod replay {
        pub use crate::tune::replay::{
            Carry, CostRatios, FORECAST_AFTER_PEAKS, Phases, ReplayReport, ReplayTable, replay_all,
            synthetic_suite,
        };
        pub mod layouts {
            pub use crate::tune::replay::layouts::synthetic_layout_suite;
        }
    }
    pub mod search {
        pub use crate::tune::search::SearchConfig;
    }
    pub mod space {
        pub use crate::tune::space::SpaceError;
    }
}

pub mod util {
    pub mod bundled {
        pub use crate::util::bundled::data_dir;
    }
    pub mod input {
        pub use crate::util::input::{CAP_ENV, cap_bytes, open_regular, read_text};
    }
    pub mod lines {
        pub use crate::util::lines::{MAX_LINE, Skipped, read_line};
    }
    pub mod num {
        pub use crate::util::num::{json_line, tidy_json};
    }
    pub mod paths {
        pub use crate::util::paths::display_path;
    }
    pub mod procfs {
        pub use crate::util::procfs::status_kb;
    }
    pub mod procinfo {
        pub use crate::util::procinfo::{ProcInfo, Users, info};
    }
    pub mod shell {
        pub use crate::util::shell::{join, quote};
    }
    pub mod suggest {
        pub use crate::util::suggest::closest;
    }
    pub mod text {
        pub use crate::util::text::{count, fit, is_control, one_line, visible};
    }
}
