//! Studies: named groups of trials over one config.

use std::path::Path;

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::Value;

use super::error::{StoreError, StoreResult};
use super::time::now_rfc3339;
use super::types::StudyRow;
use super::{Ctx, Store, from_sql_u64};

const STUDY_COLUMNS: &str = "id, name, created_at, config_path, kind, space, notes, launch, \
    (SELECT COUNT(*) FROM trials WHERE trials.study_id = studies.id) AS trials";

type RawStudy = (StudyRow, Option<String>, Option<String>);

fn raw_study(r: &Row<'_>) -> rusqlite::Result<RawStudy> {
    let config_path: String = r.get("config_path")?;
    Ok((
        StudyRow {
            id: r.get("id")?,
            name: r.get("name")?,
            created_at: r.get("created_at")?,
            config_path: config_path.into(),
            kind: r.get("kind")?,
            space: None,
            notes: r.get("notes")?,
            launch: None,
            trials: from_sql_u64(r.get("trials")?),
        },
        r.get("space")?,
        r.get("launch")?,
    ))
}

impl Store {
    /// Creates a study. Names are unique: a second study with the same name is refused.
    pub fn create_study(&self, name: &str, config_path: &Path, kind: &str) -> StoreResult<i64> {
        let what = format!("create study `{name}`");
        let now = now_rfc3339();
        self.write(&what, true, |tx| {
            let existing: Option<i64> = tx
                .query_row("SELECT id FROM studies WHERE name = ?1", [name], |r| {
                    r.get(0)
                })
                .optional()
                .ctx(&self.path, &what)?;
            if let Some(id) = existing {
                return Err(StoreError::StudyExists {
                    path: self.path.clone(),
                    name: name.to_owned(),
                    id,
                });
            }
            tx.execute(
                "INSERT INTO studies (name, created_at, config_path, kind) VALUES (?1, ?2, ?3, ?4)",
                params![name, now, config_path.to_string_lossy(), kind],
            )
            .ctx(&self.path, &what)?;
            Ok(tx.last_insert_rowid())
        })
    }

    /// All studies, by id.
    pub fn list_studies(&self) -> StoreResult<Vec<StudyRow>> {
        self.query_studies("ORDER BY id", params![])
    }

    pub fn study(&self, id: i64) -> StoreResult<Option<StudyRow>> {
        Ok(self.query_studies("WHERE id = ?1", params![id])?.pop())
    }

    pub fn study_by_name(&self, name: &str) -> StoreResult<Option<StudyRow>> {
        Ok(self.query_studies("WHERE name = ?1", params![name])?.pop())
    }

    pub fn set_study_notes(&self, id: i64, notes: Option<&str>) -> StoreResult<()> {
        let what = format!("set the notes of study {id}");
        self.update_study(id, &what, "notes", notes.map(str::to_owned))
    }

    /// Records the study's search space (any JSON the caller chooses).
    pub fn set_study_space(&self, id: i64, space: Option<&Value>) -> StoreResult<()> {
        let what = format!("set the space of study {id}");
        let text = space
            .map(serde_json::to_string)
            .transpose()
            .map_err(self.encode_err(&what))?;
        self.update_study(id, &what, "space", text)
    }

    /// Records how the study's trials launch (any JSON the caller chooses: its budget, profile,
    /// world, scheduler settings), so a resume goes on as the study began.
    pub fn set_study_launch(&self, id: i64, launch: Option<&Value>) -> StoreResult<()> {
        let what = format!("set the launch of study {id}");
        let text = launch
            .map(serde_json::to_string)
            .transpose()
            .map_err(self.encode_err(&what))?;
        self.update_study(id, &what, "launch", text)
    }

    fn update_study(
        &self,
        id: i64,
        what: &str,
        column: &str,
        value: Option<String>,
    ) -> StoreResult<()> {
        self.write(what, true, |tx| {
            let sql = format!("UPDATE studies SET {column} = ?2 WHERE id = ?1");
            let n = tx.execute(&sql, params![id, value]).ctx(&self.path, what)?;
            if n == 0 {
                return Err(self.no_study(id));
            }
            Ok(())
        })
    }

    fn query_studies(
        &self,
        tail: &str,
        args: &[&dyn rusqlite::ToSql],
    ) -> StoreResult<Vec<StudyRow>> {
        let what = "read studies";
        let raws: Vec<RawStudy> = {
            let conn = self.lock();
            let sql = format!("SELECT {STUDY_COLUMNS} FROM studies {tail}");
            let mut stmt = conn.prepare_cached(&sql).ctx(&self.path, what)?;
            stmt.query_map(args, raw_study)
                .ctx(&self.path, what)?
                .collect::<rusqlite::Result<_>>()
                .ctx(&self.path, what)?
        };
        raws.into_iter()
            .map(|(mut row, space, launch)| {
                let json = |text: Option<String>| {
                    text.as_deref()
                        .map(serde_json::from_str)
                        .transpose()
                        .map_err(|e| self.corrupt(format!("read study {}", row.id), e))
                };
                row.space = json(space)?;
                row.launch = json(launch)?;
                Ok(row)
            })
            .collect()
    }

    fn no_study(&self, id: i64) -> StoreError {
        StoreError::NoSuchStudy {
            path: self.path.clone(),
            id,
        }
    }

    pub(crate) fn require_study(&self, conn: &Connection, id: i64) -> StoreResult<()> {
        let found = conn
            .query_row("SELECT 1 FROM studies WHERE id = ?1", [id], |_| Ok(()))
            .optional()
            .ctx(&self.path, "look up a study")?;
        found.ok_or_else(|| self.no_study(id))
    }
}
