//! CSV export (RFC 4180: comma-separated, CRLF line ends, a field is quoted when it holds a
//! comma, a double quote, CR or LF, with inner quotes doubled). Missing values are empty
//! fields; floats print in Rust's shortest round-trip form (`NaN`, `inf` for non-finite).

use std::borrow::Cow;
use std::fmt::Display;
use std::io::Write;

use serde_json::Value;

use super::Store;
use super::error::{StoreError, StoreResult};
use super::trials::class_name;
use super::types::{TrialFilter, TrialRow};
use crate::domain::trial::Iteration;

/// `field` quoted for CSV when it needs to be.
pub fn csv_field(field: &str) -> Cow<'_, str> {
    if field.contains([',', '"', '\r', '\n']) {
        Cow::Owned(format!("\"{}\"", field.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(field)
    }
}

fn record(fields: &[String]) -> String {
    let mut line = String::new();
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        line.push_str(&csv_field(f));
    }
    line.push_str("\r\n");
    line
}

fn opt<T: Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// Overrides as `key=value;key=value`; string values unquoted, others as compact JSON.
pub(crate) fn overrides_text(overrides: &[(String, Value)]) -> String {
    overrides
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(";")
}

type TrialCell = fn(&TrialRow) -> String;

/// The trials export's columns.
const TRIAL_COLUMNS: &[(&str, TrialCell)] = &[
    ("id", |t| t.id.to_string()),
    ("study_id", |t| opt(t.study_id)),
    ("status", |t| t.status.to_string()),
    ("failure_class", |t| {
        opt(t.failure.as_ref().map(|f| class_name(f.class)))
    }),
    ("median_step_ms", |t| opt(t.median_step_ms)),
    ("ci95_ms", |t| opt(t.ci95_ms)),
    ("tokens_per_s_per_gpu", |t| opt(t.tokens_per_s_per_gpu)),
    ("tflops_per_gpu", |t| opt(t.tflops_per_gpu)),
    ("peak_mem_gib", |t| opt(t.peak_mem_gib)),
    ("iterations_seen", |t| t.iterations_seen.to_string()),
    ("wall_s", |t| opt(t.wall_s)),
    ("exit_code", |t| opt(t.exit_code)),
    ("exit_signal", |t| opt(t.exit_signal)),
    ("overrides", |t| overrides_text(&t.overrides)),
    ("profile", |t| t.profile.clone().unwrap_or_default()),
    ("config_path", |t| t.config_path.display().to_string()),
    ("created_at", |t| t.created_at.clone()),
    ("finished_at", |t| t.finished_at.clone().unwrap_or_default()),
];

type IterationCell = fn(&Iteration) -> String;

/// The iterations export's columns after `trial_id`: every field of [`Iteration`], in order.
const ITERATION_COLUMNS: &[(&str, IterationCell)] = &[
    ("iteration", |i| i.iteration.to_string()),
    ("train_iters", |i| opt(i.train_iters)),
    ("elapsed_ms", |i| opt(i.elapsed_ms)),
    ("elapsed_avg_ms", |i| opt(i.elapsed_avg_ms)),
    ("tflops_per_gpu", |i| opt(i.tflops_per_gpu)),
    ("tflops_avg_per_gpu", |i| opt(i.tflops_avg_per_gpu)),
    ("tokens_per_s_per_gpu", |i| opt(i.tokens_per_s_per_gpu)),
    ("tokens_avg_per_s_per_gpu", |i| {
        opt(i.tokens_avg_per_s_per_gpu)
    }),
    ("loss", |i| opt(i.loss)),
    ("learning_rate", |i| opt(i.learning_rate)),
    ("global_batch_size", |i| opt(i.global_batch_size)),
    ("grad_norm", |i| opt(i.grad_norm)),
    ("skipped_iterations", |i| opt(i.skipped_iterations)),
    ("nan_iterations", |i| opt(i.nan_iterations)),
    ("mem_used_gib", |i| opt(i.mem_used_gib)),
    ("mem_total_gib", |i| opt(i.mem_total_gib)),
    ("mem_used_pct", |i| opt(i.mem_used_pct)),
    ("rocm_mem_used_gib", |i| opt(i.rocm_mem_used_gib)),
    ("rocm_mem_total_gib", |i| opt(i.rocm_mem_total_gib)),
    ("rocm_max_mem_used_gib", |i| opt(i.rocm_max_mem_used_gib)),
    ("rocm_max_mem_rank", |i| opt(i.rocm_max_mem_rank)),
    ("mem_usage_fraction", |i| opt(i.mem_usage_fraction)),
    ("mfu_pct", |i| opt(i.mfu_pct)),
    ("timestamp", |i| i.timestamp.clone().unwrap_or_default()),
];

impl Store {
    /// Writes the trials `filter` selects as CSV: a header, then one row per trial. Returns
    /// the number of trials written.
    pub fn export_trials_csv(
        &self,
        w: &mut impl Write,
        filter: &TrialFilter,
    ) -> StoreResult<usize> {
        let trials = self.list_trials(filter)?;
        let mut out = record(
            &TRIAL_COLUMNS
                .iter()
                .map(|(h, _)| (*h).to_owned())
                .collect::<Vec<_>>(),
        );
        for t in &trials {
            out.push_str(&record(
                &TRIAL_COLUMNS
                    .iter()
                    .map(|(_, cell)| cell(t))
                    .collect::<Vec<_>>(),
            ));
        }
        self.write_out(w, &out)?;
        Ok(trials.len())
    }

    /// Writes a trial's iterations as CSV: `trial_id` then every [`Iteration`] field. Returns
    /// the number of iterations written.
    pub fn export_iterations_csv(&self, w: &mut impl Write, trial_id: i64) -> StoreResult<usize> {
        let iterations = self.iterations(trial_id)?;
        let mut header = vec!["trial_id".to_owned()];
        header.extend(ITERATION_COLUMNS.iter().map(|(h, _)| (*h).to_owned()));
        let mut out = record(&header);
        for it in &iterations {
            let mut fields = vec![trial_id.to_string()];
            fields.extend(ITERATION_COLUMNS.iter().map(|(_, cell)| cell(it)));
            out.push_str(&record(&fields));
        }
        self.write_out(w, &out)?;
        Ok(iterations.len())
    }

    fn write_out(&self, w: &mut impl Write, text: &str) -> StoreResult<()> {
        w.write_all(text.as_bytes())
            .and_then(|()| w.flush())
            .map_err(|source| StoreError::Write {
                path: self.path.clone(),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field(""), "");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        assert_eq!(csv_field("cr\rhere"), "\"cr\rhere\"");
        assert_eq!(
            record(&["a".into(), "b,c".into(), String::new()]),
            "a,\"b,c\",\r\n"
        );
    }

    #[test]
    fn overrides_as_text() {
        let o = vec![
            ("a.b".to_owned(), Value::from(4)),
            ("name".to_owned(), Value::from("x y")),
            ("flag".to_owned(), Value::from(true)),
            ("list".to_owned(), serde_json::json!([1, "z"])),
        ];
        assert_eq!(
            overrides_text(&o),
            "a.b=4;name=x y;flag=true;list=[1,\"z\"]"
        );
    }

    #[test]
    fn iteration_columns_cover_every_field_in_order() {
        let Value::Object(fields) = serde_json::to_value(Iteration::default()).unwrap() else {
            panic!("Iteration is not a JSON object");
        };
        let mut names: Vec<&str> = ITERATION_COLUMNS.iter().map(|(n, _)| *n).collect();
        let mut keys: Vec<&str> = fields.keys().map(String::as_str).collect();
        names.sort_unstable();
        keys.sort_unstable();
        assert_eq!(names, keys);
    }
}
