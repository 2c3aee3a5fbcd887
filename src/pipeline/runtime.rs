//! The runtime pipeline: a checked [`PipelineConfig`] with its source opened and its ops
//! compiled, starting epochs (from the start, from a resume state, or one slice of one).

use super::check::{self, Checked};
use super::config::{BatchConfig, EngineConfig, PipelineConfig};
use super::job_state::{Fingerprint, JobState};
use crate::batch_ops::{BatchLowered, BatchOp};
use crate::engine::batch::{BufShape, Pool};
use crate::engine::program::Program;
use crate::engine::{Epoch, Job, State};
use crate::error::OnError;
use crate::error::{Invalid, Result};
use crate::ops::Op;
use crate::plan::batch_count;
use crate::resume::World;
use crate::source::{Source, SourceConfig};
use crate::spec::Spec;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// A checked pipeline, ready to run epochs.
pub struct Pipeline {
    config: PipelineConfig,
    warnings: Vec<String>,
    source: Arc<dyn Source>,
    stages: Vec<(String, Spec)>,
    program: Arc<Program>,
    pool: Arc<Pool>,
    prefetch: usize,
    /// Computed when a job state is first taken or checked.
    fingerprint: OnceLock<Fingerprint>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("source", &self.source.describe())
            .field("stages", &self.stages)
            .finish()
    }
}

/// Build a pipeline in code.
///
/// ```no_run
/// use imgfeed::ops::{CenterCrop, Decode, Op, Resize};
/// use imgfeed::{Pipeline, SourceConfig, SourceKind};
/// let p = Pipeline::builder(SourceConfig::new(SourceKind::ImageFolder, "data/train"))
///     .op(Op::Decode(Decode::default()))
///     .op(Op::Resize(Resize::new(256)))
///     .op(Op::CenterCrop(CenterCrop::new(224)))
///     .batch(32, true)
///     .workers(2)
///     .build()?;
/// # Ok::<(), imgfeed::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct PipelineBuilder {
    config: PipelineConfig,
}

impl PipelineBuilder {
    /// Append an op.
    pub fn op(mut self, op: Op) -> Self {
        self.config.ops.push(op);
        self
    }
    /// Append a batch op.
    pub fn batch_op(mut self, op: BatchOp) -> Self {
        self.config.batch_ops.push(op);
        self
    }
    /// Batch size and whether to drop the last incomplete batch.
    pub fn batch(mut self, size: usize, drop_remainder: bool) -> Self {
        self.config.batch = BatchConfig {
            size,
            drop_remainder,
        };
        self
    }
    /// Worker threads.
    pub fn workers(mut self, n: usize) -> Self {
        self.config.engine.workers = n;
        self
    }
    /// Replace the whole engine table.
    pub fn engine(mut self, engine: EngineConfig) -> Self {
        self.config.engine = engine;
        self
    }
    /// Check and build.
    pub fn build(self) -> Result<Pipeline> {
        Pipeline::new(self.config)
    }
}

impl PipelineConfig {
    /// The ops compiled for `source`, producing `out` (its checked output spec): what a
    /// [`Pipeline`] runs, and a shards conversion re-encodes through.
    pub(crate) fn compile(&self, source: &dyn Source, out: &Spec) -> Result<Program> {
        Program::compile(
            &source.spec(),
            source.stored_layout(),
            &self.ops,
            out,
            self.engine.fuse,
        )
    }
}

impl Pipeline {
    /// Start building a pipeline over `source` (batch 1, no ops, default engine).
    pub fn builder(source: SourceConfig) -> PipelineBuilder {
        PipelineBuilder {
            config: PipelineConfig::new(source, Vec::new(), BatchConfig::default()),
        }
    }

    /// Read, parse and check a pipeline file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Pipeline> {
        Pipeline::new(PipelineConfig::from_file(path)?)
    }

    /// Check a configuration against its source and build it.
    pub fn new(config: PipelineConfig) -> Result<Pipeline> {
        // The settings are checked before the dataset is listed.
        let config = check::settings(config)?;
        let source = config.source.open()?;
        Pipeline::checked(config, source)
    }

    /// [`Pipeline::new`] over a source already opened from `config.source` (a caller that
    /// listed the dataset once to show its size and classes does not list it again).
    pub fn with_source(config: PipelineConfig, source: Arc<dyn Source>) -> Result<Pipeline> {
        Pipeline::checked(check::settings(config)?, source)
    }

    /// Build over `source` a config whose settings [`check::settings`] has checked (once: it
    /// also reads the launcher's variables for `shard = "env"`).
    fn checked(config: PipelineConfig, source: Arc<dyn Source>) -> Result<Pipeline> {
        if config.source.sampling.shuffle_window.is_some() && source.file_of().is_none() {
            return Err(Invalid::WindowKind {
                kind: config.source.kind().name(),
                root: source.root().to_path_buf(),
            }
            .into());
        }
        let Checked {
            stages,
            spec,
            elems,
        } = check::chain(&config, &source.spec())?;
        let program = config.compile(source.as_ref(), &spec)?;
        let shape = BufShape {
            batch_size: config.batch.size,
            sample_elems: elems,
            dtype: spec.dtype,
            label: spec.label,
            label_cols: spec.label_columns,
            fingerprints: config.engine.fingerprint,
        };
        let e = &config.engine;
        let batch_bytes = (shape.batch_size * shape.sample_elems * shape.dtype.size()).max(1);
        // Soft labels can outweigh the images (one_hot with many classes): keep the pool's
        // label buffers under 1 GiB.
        let label_bytes = (shape.batch_size * shape.label_cols * spec.label.size()).max(1);
        let prefetch = e
            .prefetch
            .unwrap_or_else(|| {
                ((6 << 20) / batch_bytes)
                    .clamp(2, 16)
                    .min((1 << 30) / label_bytes)
            })
            .max(1);
        let pool = Arc::new(Pool::new(shape, prefetch + e.queue.max(1) + 2));
        let mut warnings = source.warnings();
        warnings.extend(check::unit_warnings(&config.ops, &stages));
        Ok(Pipeline {
            warnings,
            config,
            source,
            stages,
            program: Arc::new(program),
            pool,
            prefetch,
            fingerprint: OnceLock::new(),
        })
    }

    /// What looks like a mistake but runs: the source's (an ImageFolder class folder without
    /// samples, which still takes a label), and a `normalize` given 0–1 mean and std
    /// (torchvision's units) on 0–255 pixels, which would produce values around ±2000.
    /// Every command prints these; nothing is changed.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The warning for a pipeline whose epochs yield no batch (fewer samples than a batch
    /// with `drop_remainder`), or `None`.
    pub fn empty_epoch_warning(&self) -> Option<String> {
        (self.batches_per_epoch() == 0).then(|| {
            format!(
                "{} an epoch, fewer than the batch size {} with drop_remainder: every epoch \
                 yields no batch (lower the batch size, or set drop_remainder = false)",
                crate::spec::count(self.samples_per_epoch() as u64, "sample", "samples"),
                self.config.batch.size
            )
        })
    }

    /// The configuration it was built from.
    pub fn config(&self) -> &PipelineConfig {
        &self.config
    }

    /// The source.
    pub fn source(&self) -> &dyn Source {
        self.source.as_ref()
    }

    /// `(stage, spec after it)`, starting with the source.
    pub fn stages(&self) -> &[(String, Spec)] {
        &self.stages
    }

    /// The fusions the engine applies, in words.
    pub fn fusions(&self) -> &[String] {
        &self.program.fusions
    }

    /// The spec of one output sample.
    pub fn output_spec(&self) -> &Spec {
        &self.program.out
    }

    /// Samples read per epoch (this shard, after `num_samples`).
    pub fn samples_per_epoch(&self) -> usize {
        self.config.source.sampling.len(self.source.len())
    }

    /// Batches per epoch.
    pub fn batches_per_epoch(&self) -> usize {
        batch_count(
            self.samples_per_epoch(),
            self.config.batch.size,
            self.config.batch.drop_remainder,
        )
    }

    /// Epoch `epoch`'s order of all the samples, before sharding: the global shuffle, or
    /// the shard-aware one over the source's files (`shuffle_window`), or the source's
    /// order. Every epoch, resume and prefetch of this pipeline reads this order.
    pub fn permutation(&self, epoch: u64) -> Vec<usize> {
        self.config
            .source
            .sampling
            .permutation(self.source.len(), epoch, self.source.file_of())
    }

    /// The samples this rank reads in epoch `epoch`, in order (its shard of
    /// [`Pipeline::permutation`], after `num_samples`).
    pub fn order(&self, epoch: u64) -> Vec<usize> {
        self.config
            .source
            .sampling
            .order(self.source.len(), epoch, self.source.file_of())
    }

    /// The run reads no epoch after `epoch` (the CLI's `--epochs`, the iterators'
    /// `num_epochs`). A hint: a source reading object storage through a cache smaller
    /// than the data keeps no samples for an epoch that never comes ([`Source::last_epoch`]);
    /// reading a later epoch anyway is correct, only without kept samples.
    pub fn last_epoch(&self, epoch: u64) {
        self.source.last_epoch(epoch);
    }

    /// Start epoch `epoch` (it seeds the shuffle and the random ops).
    pub fn epoch(&self, epoch: u64) -> Epoch {
        let order = self.order(epoch);
        self.launch(State::epoch_start(epoch), order, 0, self.first_world())
    }

    /// What a [`JobState`] taken from this pipeline must match: the dataset, the ops and
    /// the shuffle (the sample names are hashed on the first call).
    pub fn fingerprint(&self) -> &Fingerprint {
        self.fingerprint.get_or_init(|| Fingerprint::of(self))
    }

    /// Where the job stands when this rank is at `state` of an epoch split among `worlds`
    /// ([`Epoch::worlds`]; empty: this pipeline's own world from the epoch's start). Any
    /// rank's is enough for [`Pipeline::resume_job`] on any number of ranks.
    pub fn job_state(&self, state: State, worlds: &[World]) -> JobState {
        JobState::at(self, state, worlds)
    }

    /// Resume `state` on this pipeline's rank (`num_shards`, `shard_id`, batch size): the
    /// same world goes on exactly where each rank stood; another world splits what the
    /// epoch had left among its ranks by the sharding rule ([`crate::resume`]). A state
    /// from another dataset, pipeline or seed is refused, saying which.
    pub fn resume_job(&self, state: &JobState) -> Result<Epoch> {
        let start = state.start(self).map_err(Invalid::Resume)?;
        let worlds: Arc<[World]> = start.worlds.into();
        Ok(self.launch(start.state, start.order, start.start, worlds))
    }

    /// `Err` saying why [`Pipeline::resume_job`] would refuse `state` (another dataset,
    /// pipeline, seed or split), without starting anything.
    pub fn check_job_state(&self, state: &JobState) -> Result<()> {
        state.start(self).map_err(Invalid::Resume)?;
        Ok(())
    }

    /// This pipeline's world from an epoch's start.
    fn first_world(&self) -> Arc<[World]> {
        Arc::new([super::job_state::first_world(self)])
    }

    /// Start where `state` says: the batches a run that stopped at `state` would have
    /// yielded next, with any worker count (the order and every random choice depend
    /// only on the seed, the epoch and the sample).
    pub fn resume(&self, state: State) -> Result<Epoch> {
        let order = self.order(state.epoch);
        let (bs, drop) = (self.config.batch.size, self.config.batch.drop_remainder);
        let batches = batch_count(order.len(), bs, drop);
        if state.batch > batches {
            return Err(Invalid::ResumeBatch {
                batch: state.batch,
                epoch: state.epoch,
                batches,
            }
            .into());
        }
        let first = state.batch * bs;
        let skipping = self.config.engine.on_error == OnError::Skip;
        if let Some(sample) = state.sample {
            // (positions past the order's end are its end: the state after a short last batch)
            let (at, least) = (sample.min(order.len()), first.min(order.len()));
            if at < least || (!skipping && at != least) {
                return Err(Invalid::ResumeContradicts {
                    batch: state.batch,
                    sample,
                    epoch: state.epoch,
                    first,
                    skipping,
                }
                .into());
            }
        }
        // `batch × batch_size` is where the batch starts when nothing was skipped; past the
        // order's end it is the end (the state after a short last batch)
        let start = match state.sample {
            Some(s) if skipping && s != first => s,
            _ => first.min(order.len()),
        };
        if start > order.len() {
            return Err(Invalid::ResumeSample {
                sample: start,
                epoch: state.epoch,
                samples: order.len(),
            }
            .into());
        }
        Ok(self.launch(state, order, start, self.first_world()))
    }

    /// Epoch `epoch`'s contiguous slice `id` of `count` of this shard's order (positions
    /// [`crate::shards::slice_range`]): the slices of a conversion split into jobs, which
    /// together hold the epoch's samples once, in order, with the same bytes (every random
    /// draw depends on the sample, not on the slice). Batches are numbered from 0.
    pub fn epoch_slice(&self, epoch: u64, id: usize, count: usize) -> Result<Epoch> {
        if count == 0 || id >= count {
            return Err(Invalid::Slice { id, count }.into());
        }
        let mut order = self.order(epoch);
        let (first, end) = crate::shards::slice_range(order.len(), id, count);
        order.truncate(end);
        Ok(self.launch(State::epoch_start(epoch), order, first, self.first_world()))
    }

    /// Run this shard's `order` of `state.epoch` (split among `worlds`) from position
    /// `start` (checked to be inside it), numbering batches from `state.batch`.
    fn launch(&self, state: State, order: Vec<usize>, start: usize, worlds: Arc<[World]>) -> Epoch {
        let e = &self.config.engine;
        let (bs, drop) = (self.config.batch.size, self.config.batch.drop_remainder);
        // Skip mode reads to the end of the order (later samples fill in for skipped
        // ones); the others read exactly the announced batches.
        let end = if e.on_error == OnError::Skip {
            order.len()
        } else {
            (batch_count(order.len(), bs, drop) * bs).min(order.len())
        };
        let total = end.saturating_sub(start);
        self.source
            .epoch_starts(state.epoch, order.get(start..end).unwrap_or(&[]));
        Epoch::start(Job {
            source: Arc::clone(&self.source),
            program: Arc::clone(&self.program),
            pool: Arc::clone(&self.pool),
            order,
            worlds,
            start,
            total,
            first_batch: state.batch,
            batches: total.div_ceil(bs),
            drop_remainder: drop,
            seed: self.config.source.sampling.seed,
            epoch: state.epoch,
            workers: e.workers,
            prefetch: self.prefetch,
            queue: e.queue,
            on_error: e.on_error,
            profile: e.profile,
            work_unit: e
                .work_unit
                .unwrap_or_else(|| self.source.work_unit())
                .max(1),
            label_rows: self
                .config
                .batch_ops
                .iter()
                .find_map(|op| match op.def().lower() {
                    BatchLowered::LabelRows { on, off, stage } => Some((on, off, stage)),
                    BatchLowered::Batch(_) => None,
                }),
            batch_kernels: self
                .config
                .batch_ops
                .iter()
                .filter_map(|op| match op.def().lower() {
                    BatchLowered::Batch(k) => Some(k),
                    BatchLowered::LabelRows { .. } => None,
                })
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::image::{bug, Sample};
    use crate::ops::kernel::Kernel;
    use crate::source::SourceKind;
    use crate::{Error, Fault};

    /// A kernel that finds its own state inconsistent on every sample.
    #[derive(Debug)]
    struct Broken;

    impl Kernel for Broken {
        fn name(&self) -> &'static str {
            "broken"
        }

        fn run(&self, _: &mut Sample<'_, '_>) -> std::result::Result<(), Fault> {
            Err(bug("the kernel's plan does not fit the image"))
        }
    }

    /// An internal fault (a bug, not a bad file) ends the epoch as `Error::Internal`, under
    /// every error policy: never skipped, replaced or reported as a bad sample.
    #[test]
    fn an_internal_fault_ends_the_epoch_as_a_bug_whatever_the_error_policy() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/imagefolder");
        for on_error in [OnError::Error, OnError::Skip, OnError::Replace] {
            let source = SourceConfig::new(SourceKind::ImageFolder, &root);
            let config = PipelineConfig::new(
                source,
                vec![
                    Op::Decode(Default::default()),
                    Op::CenterCrop(crate::ops::CenterCrop::new(8)),
                ],
                BatchConfig::new(2),
            )
            .engine(EngineConfig::default().workers(2).on_error(on_error));
            let mut p = Pipeline::new(config).expect("builds");
            let mut program = (*p.program).clone();
            program.kernels.push(Arc::new(Broken));
            p.program = Arc::new(program);
            let results: Vec<_> = p.epoch(0).collect();
            assert_eq!(
                results.len(),
                1,
                "{on_error:?}: the first error ends the epoch"
            );
            match &results[0] {
                Err(Error::Internal(m)) => assert!(
                    m.contains("broken: the kernel's plan does not fit the image"),
                    "{on_error:?}: {m}"
                ),
                other => panic!("{on_error:?}: expected Error::Internal, got {other:?}"),
            }
        }
    }
}
