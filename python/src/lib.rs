//! `imgfeed._imgfeed`: the native half of the Python package.
//!
//! A thin layer over the `imgfeed` library: a [`Source`] opened once (size, classes, op
//! checks), a [`Pipeline`] built from the same JSON the pipeline files deserialize to, an
//! [`Epoch`] iterator that waits for batches with the GIL released, and [`Batch`]es whose
//! numpy arrays view the engine's pooled buffer. Everything MindSpore- or torch-shaped is
//! written in Python on top of these (`imgfeed/dataset`, `imgfeed/_loader.py`).
//!
//! Zero copy: a batch's buffer moves into a [`BatchMemory`] object, which becomes the numpy
//! base object of the `images` and `labels` arrays. The buffer goes back to the pipeline's
//! pool when the last array viewing it is released.

mod batch;
mod errors;

use batch::{Batch, BatchMemory};
use errors::to_py;
use imgfeed::engine::fingerprint as fp;
use imgfeed::pipeline::Overrides;
use imgfeed::plan::ShardFrom;
use imgfeed::{Error, LabelType, Layout, PipelineConfig, SourceConfig, Spec, State, TimedOut};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How long one wait for a batch lasts before the waiting thread takes the GIL back to
/// let Python run its signal handlers (Ctrl-C raises `KeyboardInterrupt` within this).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// `MutexGuard` even after a panic elsewhere poisoned the lock (the data is still whole:
/// every critical section here only moves values in or out).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A `UserWarning` with `message` (`imgfeed: ...`), attributed to the user's line that asked
/// for the batch, not to imgfeed's own (`imgfeed._warn.warn`).
fn warn(py: Python<'_>, message: &str) -> PyResult<()> {
    py.import("imgfeed._warn")?
        .call_method1("warn", (message,))?;
    Ok(())
}

/// A job state from its JSON (`ValueError` saying why not).
fn parse_state(text: &str) -> PyResult<imgfeed::pipeline::JobState> {
    imgfeed::pipeline::JobState::from_json(text).map_err(|e| PyValueError::new_err(e.to_string()))
}

fn parse_json<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> PyResult<T> {
    serde_json::from_str(text).map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

/// A spec as a plain dict: `encoded`, `height`, `width` (None when it varies),
/// `channels`, `layout` ("hwc"/"chw"), `dtype`, `label`, `label_columns`.
fn spec_dict<'py>(py: Python<'py>, s: &Spec) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("encoded", s.encoded)?;
    d.set_item("height", s.height)?;
    d.set_item("width", s.width)?;
    d.set_item("channels", s.channels)?;
    d.set_item(
        "layout",
        match s.layout {
            Layout::Hwc => "hwc",
            Layout::Chw => "chw",
        },
    )?;
    d.set_item("dtype", s.dtype.name())?;
    d.set_item("label", s.label.name())?;
    d.set_item("label_columns", s.label_columns)?;
    Ok(d)
}

/// Two `[source]` tables that list the same samples (they may sample them differently).
fn same_dataset(a: &SourceConfig, b: &SourceConfig) -> bool {
    a.dataset == b.dataset
}

/// A pipeline file's tables, with `root` made absolute (relative to the file).
fn load_file(path: &std::path::Path) -> imgfeed::Result<PipelineConfig> {
    let mut config = PipelineConfig::from_file(path)?;
    if let Ok(abs) = std::path::absolute(config.source.root()) {
        config.source.dataset.root_mut().clone_from(&abs);
    }
    Ok(config)
}

/// A dataset opened once: listed (ImageFolder) or mapped (CIFAR, shards), no sample read.
#[pyclass(module = "imgfeed._imgfeed", frozen)]
struct Source {
    config: SourceConfig,
    inner: Arc<dyn imgfeed::source::Source>,
}

#[pymethods]
impl Source {
    /// Open the `[source]` table given as JSON (the GIL is released while it lists).
    #[new]
    fn new(py: Python<'_>, source_json: &str) -> PyResult<Source> {
        let config: SourceConfig = parse_json("source", source_json)?;
        let opened = py.detach(|| config.open());
        let inner = opened.map_err(|e| to_py(py, &e))?;
        Ok(Source { config, inner })
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// One line: kind, root, sample and class counts.
    fn describe(&self) -> String {
        self.inner.describe()
    }

    /// `[(class name, label)]` for sources that name their classes, else `[]`.
    fn classes(&self) -> Vec<(String, u32)> {
        self.inner.classes().to_vec()
    }

    /// What a sample looks like as read.
    fn spec<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        spec_dict(py, &self.inner.spec())
    }

    /// The samples an epoch reads with the sampling of `source_json` (shards, padding,
    /// `num_samples`): what one rank sees.
    fn samples_per_epoch(&self, py: Python<'_>, source_json: &str) -> PyResult<usize> {
        let mut cfg: SourceConfig = parse_json("source", source_json)?;
        cfg.resolve_shard(|k| std::env::var(k).ok())
            .map_err(|e| to_py(py, &e))?;
        let sampling = cfg.sampling;
        sampling
            .validate()
            .map_err(|e| PyValueError::new_err(format!("source: {e}")))?;
        Ok(sampling.len(self.inner.len()))
    }

    /// `[(stage, spec)]` after each op of `ops_json` (a JSON list of op tables), or
    /// `ValueError` naming the first op that cannot take its input.
    fn check_ops<'py>(
        &self,
        py: Python<'py>,
        ops_json: &str,
    ) -> PyResult<Vec<(String, Bound<'py, PyDict>)>> {
        let ops: Vec<imgfeed::ops::Op> = parse_json("ops", ops_json)?;
        let stages = imgfeed::spec_chain(&self.inner.spec(), &ops).map_err(|e| to_py(py, &e))?;
        stages
            .iter()
            .map(|(name, spec)| Ok((name.clone(), spec_dict(py, spec)?)))
            .collect()
    }
}

/// A checked pipeline, ready to run epochs.
#[pyclass(module = "imgfeed._imgfeed", frozen)]
struct Pipeline {
    inner: Arc<imgfeed::Pipeline>,
}

#[pymethods]
impl Pipeline {
    /// Build from the pipeline's JSON (the pipeline file's tables); over `source` when it
    /// was opened from the same `[source]` table, else the source is opened here.
    #[new]
    #[pyo3(signature = (config_json, source = None))]
    fn new(py: Python<'_>, config_json: &str, source: Option<&Source>) -> PyResult<Pipeline> {
        let config = PipelineConfig::from_json(config_json).map_err(|e| to_py(py, &e))?;
        let reused = source
            .filter(|s| same_dataset(&s.config, &config.source))
            .map(|s| Arc::clone(&s.inner));
        let built = py.detach(|| match reused {
            Some(src) => imgfeed::Pipeline::with_source(config, src),
            None => imgfeed::Pipeline::new(config),
        });
        let inner = built.map_err(|e| to_py(py, &e))?;
        Ok(Pipeline {
            inner: Arc::new(inner),
        })
    }

    /// The one crossing of a `Loader`: the pipeline's tables (`config_json`, or the pipeline
    /// file at `path`, its `root` relative to the file) with `overrides_json` applied and
    /// checked, built. With `launched` (a launcher such as torchrun or msrun started the
    /// process) and a pipeline that names no shard of its own (`shard = "config"`, one
    /// shard, none given in the overrides), the shard is read from the launcher's variables.
    #[staticmethod]
    #[pyo3(signature = (config_json, path, overrides_json, launched))]
    fn with_overrides(
        py: Python<'_>,
        config_json: Option<&str>,
        path: Option<std::path::PathBuf>,
        overrides_json: &str,
        launched: bool,
    ) -> PyResult<Pipeline> {
        let built = py.detach(|| {
            let mut config = match (config_json, &path) {
                (Some(json), _) => PipelineConfig::from_json(json)?,
                (None, Some(path)) => load_file(path)?,
                (None, None) => {
                    return Err(Error::Internal(
                        "Pipeline.with_overrides: neither tables nor a file".into(),
                    ))
                }
            };
            let overrides = Overrides::from_json(overrides_json)?;
            overrides.apply(&mut config)?;
            let sampling = &mut config.source.sampling;
            if launched
                && overrides.num_shards.is_none()
                && sampling.shard == ShardFrom::Config
                && sampling.num_shards == 1
            {
                sampling.shard = ShardFrom::Env;
            }
            imgfeed::Pipeline::new(config)
        });
        let inner = built.map_err(|e| to_py(py, &e))?;
        Ok(Pipeline {
            inner: Arc::new(inner),
        })
    }

    /// Check the pipeline's JSON tables without opening the dataset: `ValueError` naming
    /// the table at fault (`ops[0] (decod): unknown variant ...`).
    #[staticmethod]
    fn check_config(py: Python<'_>, config_json: &str) -> PyResult<()> {
        PipelineConfig::from_json(config_json)
            .map(drop)
            .map_err(|e| to_py(py, &e))
    }

    /// The pipeline's JSON tables with `overrides_json` applied (an object of the settings
    /// the command line's flags also change: `batch_size`, `workers`, `seed`, ...; see
    /// `imgfeed::pipeline::Overrides`), by the code the command line uses; `ValueError`
    /// naming the setting refused.
    #[staticmethod]
    fn apply_overrides(
        py: Python<'_>,
        config_json: &str,
        overrides_json: &str,
    ) -> PyResult<String> {
        let mut config = PipelineConfig::from_json(config_json).map_err(|e| to_py(py, &e))?;
        Overrides::from_json(overrides_json)
            .and_then(|o| o.apply(&mut config))
            .map_err(|e| to_py(py, &e))?;
        serde_json::to_string(&config).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// A pipeline file's tables as JSON, with `root` made absolute (relative to the file).
    #[staticmethod]
    fn load_config(py: Python<'_>, path: std::path::PathBuf) -> PyResult<String> {
        let config = load_file(&path).map_err(|e| to_py(py, &e))?;
        serde_json::to_string(&config).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// The configuration it was built from, as JSON.
    fn config_json(&self) -> PyResult<String> {
        serde_json::to_string(self.inner.config())
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }

    /// Samples per epoch (this shard).
    fn samples_per_epoch(&self) -> usize {
        self.inner.samples_per_epoch()
    }

    /// Batches per epoch (this shard).
    fn batches_per_epoch(&self) -> usize {
        self.inner.batches_per_epoch()
    }

    /// The run reads no epoch after `epoch`: a dataset in object storage read through a
    /// cache smaller than it keeps no samples for an epoch that never comes.
    fn last_epoch(&self, epoch: u64) {
        self.inner.last_epoch(epoch);
    }

    /// Samples in the dataset (every shard).
    fn source_len(&self) -> usize {
        self.inner.source().len()
    }

    /// One line about the source.
    fn describe(&self) -> String {
        self.inner.source().describe()
    }

    /// `[(class name, label)]` for sources that name their classes.
    fn classes(&self) -> Vec<(String, u32)> {
        self.inner.source().classes().to_vec()
    }

    /// `[(stage, spec)]`, starting with the source.
    fn stages<'py>(&self, py: Python<'py>) -> PyResult<Vec<(String, Bound<'py, PyDict>)>> {
        self.inner
            .stages()
            .iter()
            .map(|(name, spec)| Ok((name.clone(), spec_dict(py, spec)?)))
            .collect()
    }

    /// The fusions the engine applies, in words.
    fn fusions(&self) -> Vec<String> {
        self.inner.fusions().to_vec()
    }

    /// What looks like a mistake but runs (normalize given 0–1 units on 0–255 pixels).
    fn warnings(&self) -> Vec<String> {
        self.inner.warnings().to_vec()
    }

    /// The spec of one output sample.
    fn output_spec<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        spec_dict(py, self.inner.output_spec())
    }

    /// The job state (JSON) of a rank of this pipeline at `batch` of `epoch` (position
    /// `sample` of its shard after skipped samples) of an ordinary epoch.
    #[pyo3(signature = (epoch, batch = 0, sample = None))]
    fn job_state(&self, epoch: u64, batch: usize, sample: Option<usize>) -> String {
        let sample = sample.or(Some(batch * self.inner.config().batch.size));
        let state = State {
            epoch,
            batch,
            sample,
        };
        self.inner.job_state(state, &[]).to_json()
    }

    /// Raise `ValueError` saying why this pipeline cannot resume the job state `state`
    /// (JSON): another dataset, pipeline, seed or split; return its epoch otherwise.
    fn check_state(&self, py: Python<'_>, state: &str) -> PyResult<u64> {
        let job = parse_state(state)?;
        let inner = Arc::clone(&self.inner);
        py.detach(move || inner.check_job_state(&job).map(|()| job.epoch))
            .map_err(|e| to_py(py, &e))
    }

    /// The job state (JSON) of this rank once it has resumed `state` (JSON) and yielded
    /// `batches` more batches.
    fn advance_state(&self, state: &str, batches: usize) -> PyResult<String> {
        let job = parse_state(state)?;
        job.advanced(&self.inner, batches)
            .map(|j| j.to_json())
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// `(batches, samples)` this rank yields resuming `state` (JSON).
    fn state_extent(&self, state: &str) -> PyResult<(usize, usize)> {
        let job = parse_state(state)?;
        job.extent(&self.inner)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The contact sheet of epoch `epoch` from batch `batch`: its first `count` samples as
    /// the trainer gets them, undone into pictures and captioned, as PNG bytes — what
    /// `imgfeed preview --out FILE.png` writes, from the same code.
    #[pyo3(signature = (epoch = 0, batch = 0, count = 16, with_source = false, tile = None))]
    fn preview_png(
        &self,
        py: Python<'_>,
        epoch: u64,
        batch: usize,
        count: usize,
        with_source: bool,
        tile: Option<usize>,
    ) -> PyResult<Py<pyo3::types::PyBytes>> {
        if count == 0 || tile == Some(0) {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "count and tile must be at least 1",
            ));
        }
        let inner = Arc::clone(&self.inner);
        let png = py.detach(move || {
            let state = State {
                epoch,
                batch,
                sample: None,
            };
            let started = if batch == 0 {
                inner.epoch(epoch)
            } else {
                inner.resume(state)?
            };
            let opts = imgfeed::preview::PreviewOptions {
                count,
                with_source,
                tile,
            };
            let shown = imgfeed::preview::preview(&inner, started, &opts)?;
            imgfeed::preview::sheet::sheet(&shown).png()
        });
        let png = png.map_err(|e| to_py(py, &e))?;
        Ok(pyo3::types::PyBytes::new(py, &png).unbind())
    }

    /// Start epoch `epoch`, or resume it at `batch` (and, after skipped samples, at
    /// position `sample` of the shard's order) — or, given `state` (a job state as JSON,
    /// from `Epoch.job_state`), resume that state on this pipeline's world.
    #[pyo3(signature = (epoch, batch = 0, sample = None, state = None))]
    fn epoch(
        &self,
        py: Python<'_>,
        epoch: u64,
        batch: usize,
        sample: Option<usize>,
        state: Option<&str>,
    ) -> PyResult<Epoch> {
        let job = state.map(parse_state).transpose()?;
        let epoch = job.as_ref().map_or(epoch, |j| j.epoch);
        let state = State {
            epoch,
            batch,
            sample: if batch == 0 { Some(0) } else { sample },
        };
        let inner = Arc::clone(&self.inner);
        let started = py.detach(move || match job {
            Some(job) => inner.resume_job(&job),
            None if state == State::epoch_start(epoch) => Ok(inner.epoch(epoch)),
            None => inner.resume(state),
        });
        let started = started.map_err(|e| to_py(py, &e))?;
        if let Some(w) = self.inner.empty_epoch_warning() {
            warn(py, &format!("imgfeed: epoch {epoch}: {w}"))?;
        }
        let spec = self.inner.output_spec();
        let verb = match self.inner.config().engine.on_error {
            imgfeed::OnError::Replace => "replaced",
            _ => "skipped",
        };
        Ok(Epoch {
            pipeline: Arc::clone(&self.inner),
            worlds: started.worlds().to_vec(),
            state: Mutex::new(started.state()),
            batches: started.batches(),
            inner: Mutex::new(Some(started)),
            tail: Mutex::new(Vec::new()),
            bad: Mutex::new(Vec::new()),
            verb,
            epoch,
            label: spec.label,
            dtype: spec.dtype,
        })
    }
}

/// One epoch in flight: iterate it for [`Batch`]es. Dropping or closing it stops and joins
/// the engine's threads.
#[pyclass(module = "imgfeed._imgfeed", frozen)]
struct Epoch {
    /// The pipeline it runs (for its job state).
    pipeline: Arc<imgfeed::Pipeline>,
    /// The worlds the epoch was split among, this one last.
    worlds: Vec<imgfeed::resume::World>,
    inner: Mutex<Option<imgfeed::Epoch>>,
    /// Skip mode: the bad samples of a last batch that was not yielded, kept when the
    /// engine's epoch is closed.
    tail: Mutex<Vec<Error>>,
    /// Where the run stands (kept after the epoch ends or is closed).
    state: Mutex<State>,
    /// The bad samples the yielded batches left out or replaced, as `FILE: STAGE: REASON`,
    /// for the warning at the epoch's end.
    bad: Mutex<Vec<String>>,
    /// What the engine did with them: `skipped` or `replaced`.
    verb: &'static str,
    epoch: u64,
    batches: usize,
    label: LabelType,
    dtype: imgfeed::DType,
}

impl Epoch {
    /// Take the engine's epoch out, keeping its dropped-tail errors.
    fn take(&self) -> Option<imgfeed::Epoch> {
        let mut taken = lock(&self.inner).take();
        if let Some(epoch) = taken.as_mut() {
            lock(&self.tail).extend(epoch.dropped_tail_errors());
        }
        taken
    }

    /// At the end of the epoch, one `UserWarning` naming the bad samples that were skipped or
    /// replaced (the CLI lists them on stderr; a Python loop would otherwise never know).
    fn warn_bad(&self, py: Python<'_>) -> PyResult<()> {
        let mut bad = std::mem::take(&mut *lock(&self.bad));
        bad.extend(lock(&self.tail).iter().map(|e| e.to_string()));
        if bad.is_empty() {
            return Ok(());
        }
        const SHOWN: usize = 10;
        let more = bad.len().saturating_sub(SHOWN);
        let mut message = format!(
            "imgfeed: epoch {}: {} bad sample{} {}: {}",
            self.epoch,
            bad.len(),
            if bad.len() == 1 { "" } else { "s" },
            self.verb,
            bad[..bad.len().min(SHOWN)].join("; ")
        );
        if more > 0 {
            message.push_str(&format!(
                "; and {more} more (each batch's `skipped` lists them)"
            ));
        }
        warn(py, &message)
    }

    /// Stop the engine, joining its threads without the GIL.
    fn close_inner(&self, py: Python<'_>) {
        if let Some(epoch) = self.take() {
            py.detach(move || drop(epoch));
        }
    }

    /// Stop the engine without waiting: a worker finishes the sample it is on (a large
    /// image can take a second) on a thread of its own, so `KeyboardInterrupt` reaches the
    /// training loop at once.
    fn stop_in_background(&self) {
        if let Some(epoch) = self.take() {
            // Detached. Should no thread be available, `spawn` drops its closure, and
            // with it the epoch, right here: a stop that waits, still a stop.
            let _ = std::thread::Builder::new()
                .name("imgfeed-stop".into())
                .spawn(move || drop(epoch));
        }
    }
}

#[pymethods]
impl Epoch {
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// The next batch. The GIL is released while waiting; every 50 ms the wait takes it
    /// back to run Python's signal handlers, so Ctrl-C raises `KeyboardInterrupt` (and
    /// stops the workers) promptly.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Batch>> {
        loop {
            let polled = py.detach(|| match lock(&self.inner).as_mut() {
                Some(epoch) => epoch
                    .next_timeout(SIGNAL_POLL)
                    .map(|item| (item, epoch.state())),
                None => Ok((None, *lock(&self.state))),
            });
            match polled {
                Err(TimedOut) => {
                    if let Err(interrupted) = py.check_signals() {
                        self.stop_in_background();
                        return Err(interrupted);
                    }
                }
                Ok((item, state)) => {
                    *lock(&self.state) = state;
                    return match item {
                        Some(Ok(batch)) => {
                            lock(&self.bad).extend(batch.skipped().iter().map(|e| e.to_string()));
                            Batch::new(py, batch, self.label, self.dtype).map(Some)
                        }
                        Some(Err(e)) => {
                            self.close_inner(py);
                            Err(to_py(py, &e))
                        }
                        None => {
                            self.close_inner(py);
                            self.warn_bad(py)?;
                            Ok(None)
                        }
                    };
                }
            }
        }
    }

    /// `(epoch, next batch, position of its first sample)`: resume from it with
    /// `Pipeline.epoch(epoch, batch, sample)`.
    fn state(&self) -> (u64, usize, Option<usize>) {
        let s = *lock(&self.state);
        (s.epoch, s.batch, s.sample)
    }

    /// Where the job stands, as JSON (a job state: any rank's resumes the epoch on any
    /// number of ranks with `Pipeline.epoch(state=...)`).
    fn job_state(&self) -> String {
        let s = *lock(&self.state);
        self.pipeline.job_state(s, &self.worlds).to_json()
    }

    /// Batches this epoch yields from where it started (fewer after skipped samples).
    fn __len__(&self) -> usize {
        self.batches
    }

    /// With `on_error="skip"`: the bad samples of a last batch that was not yielded
    /// (dropped by `drop_remainder`, or with no good sample left), as `SampleError`s; call
    /// it once the iteration has ended (each error is returned once).
    fn dropped_tail_errors(&self, py: Python<'_>) -> Vec<Py<PyAny>> {
        if let Some(epoch) = lock(&self.inner).as_mut() {
            lock(&self.tail).extend(epoch.dropped_tail_errors());
        }
        let errors = std::mem::take(&mut *lock(&self.tail));
        errors
            .iter()
            .map(|e| to_py(py, e).into_value(py).into_any())
            .collect()
    }

    /// Stop the workers now (also done when the epoch ends, fails or is dropped).
    fn close(&self, py: Python<'_>) {
        self.close_inner(py);
    }
}

impl Drop for Epoch {
    /// An epoch dropped by Python (an iterator abandoned mid-epoch) stops its workers
    /// without making Python wait for the sample each one is on.
    fn drop(&mut self) {
        self.stop_in_background();
    }
}

/// The 64-bit fingerprint of `data` that the engine's workers compute for each sample
/// (`imgfeed run` folds them into its digest).
#[pyfunction]
fn fingerprint(data: &[u8]) -> u64 {
    fp::fingerprint(data)
}

/// One FNV-1a 64 step of `imgfeed run`'s digest: fold `value` into `h`.
#[pyfunction]
fn fold(h: u64, value: u64) -> u64 {
    fp::fold(h, value)
}

/// The settings `Pipeline.replace` and `Loader` take, one dict each (the library's table of
/// settings, which the command line's flags are also made from): `name` (the keyword),
/// `table` and `key` (what it replaces in the pipeline), `kind` (`path`, `int`, `bool`,
/// `text`, `choice`), `choices`, `doc`, `default` (in words, or None) and `flag` (the
/// command line's, or None).
#[pyfunction]
fn settings(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    use imgfeed::pipeline::overrides::{Kind, SETTINGS};
    SETTINGS
        .iter()
        .map(|s| {
            let d = PyDict::new(py);
            d.set_item("name", s.name)?;
            d.set_item("table", s.table)?;
            d.set_item("key", s.key)?;
            let kind = match s.kind {
                Kind::Path => "path",
                Kind::Int => "int",
                Kind::Bool => "bool",
                Kind::Choice => "choice",
                _ => "text",
            };
            d.set_item("kind", kind)?;
            d.set_item("choices", s.choices())?;
            d.set_item("doc", s.doc())?;
            d.set_item("default", s.default)?;
            d.set_item("flag", s.flag.map(|f| format!("--{}", f.long)))?;
            Ok(d)
        })
        .collect()
}

/// Check the rules between settings that need no pipeline (`num_shards` and `shard_id`
/// together, the rank below the ranks) on `overrides_json`: `ValueError` in the engine's words.
#[pyfunction]
fn check_overrides(py: Python<'_>, overrides_json: &str) -> PyResult<()> {
    Overrides::from_json(overrides_json)
        .and_then(|o| o.check())
        .map_err(|e| to_py(py, &e))
}

/// Every per-sample op's name in pipeline files (`decode`, `resize`, ...).
#[pyfunction]
fn op_names() -> Vec<&'static str> {
    imgfeed::ops::Op::NAMES.to_vec()
}

/// Every batch op's name in pipeline files (`one_hot`, `mixup`, ...).
#[pyfunction]
fn batch_op_names() -> Vec<&'static str> {
    imgfeed::batch_ops::BatchOp::NAMES.to_vec()
}

/// Every source kind's name in pipeline files (`image_folder`, `cifar10`, ...).
#[pyfunction]
fn source_kinds() -> Vec<&'static str> {
    imgfeed::SourceKind::NAMES.to_vec()
}

/// The `imgfeed` command (`imgfeed._cli`, the wheel's console script): `args` is the
/// command line, the program's name first; returns the exit code. The command is the
/// crate's own ([`imgfeed::main_with_args`], what the binary runs), with the GIL released.
#[pyfunction]
fn cli_main(py: Python<'_>, args: Vec<std::ffi::OsString>) -> i32 {
    py.detach(|| imgfeed::main_with_args(args))
}

/// The native module.
#[pymodule]
fn _imgfeed(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Source>()?;
    m.add_class::<Pipeline>()?;
    m.add_class::<Epoch>()?;
    m.add_class::<Batch>()?;
    m.add_class::<BatchMemory>()?;
    m.add_function(wrap_pyfunction!(fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(fold, m)?)?;
    m.add_function(wrap_pyfunction!(op_names, m)?)?;
    m.add_function(wrap_pyfunction!(settings, m)?)?;
    m.add_function(wrap_pyfunction!(check_overrides, m)?)?;
    m.add_function(wrap_pyfunction!(batch_op_names, m)?)?;
    m.add_function(wrap_pyfunction!(source_kinds, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add("OFFSET64", fp::OFFSET64)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
