//! What a command was given, merged from its flag groups: the pipeline file, the settings
//! the flags override (the library's [`Overrides`], applied by it) and where to start.

use super::args::{EngineFlags, ErrorFlags, Input, ResumeFlags, SamplingFlags};
use imgfeed::pipeline::overrides::{FlagGroup, Setting};
use imgfeed::pipeline::Overrides;
use imgfeed::{Pipeline, PipelineConfig, State};
use std::path::PathBuf;

/// What a command was given: its flags, merged (a group a command does not take is left
/// at its defaults).
#[derive(Debug, Default)]
pub(super) struct Common {
    pub(super) pipeline: PathBuf,
    /// The settings the flags change on the pipeline file's.
    pub(super) overrides: Overrides,
    pub(super) start_epoch: u64,
    pub(super) start_batch: usize,
    pub(super) start_sample: Option<usize>,
    /// `--start-position` and `--start-world`: a global position, resumed on any world.
    pub(super) start_global: Option<(usize, Vec<super::start::WorldFlag>)>,
    /// Whether any resume flag was given (even at its default value).
    pub(super) resume_given: bool,
}

impl Common {
    pub(super) fn new(input: Input, engine: EngineFlags) -> Common {
        Common {
            pipeline: input.pipeline,
            overrides: input.settings.given.or(engine.given),
            ..Common::default()
        }
    }

    pub(super) fn sampling(mut self, s: SamplingFlags) -> Common {
        self.overrides = std::mem::take(&mut self.overrides).or(s.given);
        self
    }

    pub(super) fn errors(mut self, e: ErrorFlags) -> Common {
        self.overrides = std::mem::take(&mut self.overrides).or(e.given);
        self
    }

    pub(super) fn resume(mut self, r: ResumeFlags) -> Common {
        self.start_epoch = r.start_epoch.unwrap_or(0);
        self.start_batch = r.start_batch.unwrap_or(0);
        self.start_sample = r.start_sample;
        self.resume_given = r.start_epoch.is_some()
            || r.start_batch.is_some()
            || r.start_sample.is_some()
            || r.start_position.is_some();
        self.start_global = r.start_position.zip(r.start_world.map(|w| w.0));
        self
    }

    /// Whether any resume flag was given.
    pub(super) fn resumes(&self) -> bool {
        self.resume_given
    }

    /// The sampling flags given, as typed (`--no-shuffle` for `shuffle = false`).
    pub(super) fn sampling_flags(&self) -> Vec<String> {
        let values = serde_json::to_value(&self.overrides).unwrap_or_default();
        self.overrides
            .given()
            .into_iter()
            .filter_map(Setting::named)
            .filter_map(|row| {
                let flag = row.flag.filter(|f| f.group == FlagGroup::Sampling)?;
                let negated = values.get(row.name) == Some(&serde_json::Value::Bool(false));
                Some(match flag.negation {
                    Some((negation, _)) if negated => format!("--{negation}"),
                    _ => format!("--{}", flag.long),
                })
            })
            .collect()
    }

    /// The pipeline file's tables with the flags applied.
    pub(super) fn config(&self) -> imgfeed::Result<PipelineConfig> {
        let mut cfg = PipelineConfig::from_file(&self.pipeline)?;
        self.overrides.apply(&mut cfg)?;
        Ok(cfg)
    }

    pub(super) fn pipeline(&self) -> imgfeed::Result<Pipeline> {
        Pipeline::new(self.config()?)
    }

    /// The first epoch of a run of `p`, started where the resume flags say: a rank's
    /// position (`--start-batch`, `--start-sample`), or the global one (`--start-position`
    /// with `--start-world`), which resumes on any number of ranks.
    pub(super) fn open_start(&self, p: &Pipeline) -> imgfeed::Result<imgfeed::Epoch> {
        match &self.start_global {
            None => p.resume(self.start()),
            Some((position, worlds)) => {
                p.resume_job(&super::start::job_state(self, p, *position, worlds))
            }
        }
    }

    /// Where `--start-epoch`, `--start-batch` and `--start-sample` say to start.
    pub(super) fn start(&self) -> State {
        State {
            epoch: self.start_epoch,
            batch: self.start_batch,
            sample: self.start_sample,
        }
    }
}
