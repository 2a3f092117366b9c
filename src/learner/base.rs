//! [`LearnerCore`]: the state every learner keeps the same way (config, window, counters, last
//! certificate) and the rules every learner follows with it — the idle rules, the block choice, the
//! progressive loss, publishing the better of two certificates over an unchanged window, the
//! checkpoint payload. An adapter ([`super::sdiht`], [`super::mirror`], ...) adds only its solver's
//! state.

use super::*;

/// The state every learner keeps the same way, and the rules every learner follows with it.
#[derive(Debug, Clone)]
pub struct LearnerCore {
    pub config: LearnerConfig,
    /// The last `window.capacity` samples with their duals.
    pub window: Window,
    pub stats: LearnerStats,
    /// The certificate of the last [`StreamingLearner::certify`].
    pub last_certificate: Option<Certificate>,
    /// A sample arrived since `last_certificate`, so it no longer says whether the learner converged.
    pub inserted_since_certificate: bool,
    /// Steps since the last insert (so a stalled learner resumes idle).
    pub steps_since_insert: u64,
    /// Picks the block of each step; seeded from the config and the steps taken, so a resumed learner
    /// does not replay the blocks it already visited.
    pub rng: ChaCha8Rng,
    /// The model [`LearnerCore::certified_best`] last published, while the window has not changed
    /// since (`None` after an insert).
    best: Option<Model>,
    /// The polish of the models [`LearnerCore::certified_best`] publishes, and its time budget.
    polish: polish::PublishPolish,
    /// The largest `|label|` seen (squared loss: [`LearnerCore::bounded_score`]); restored from the
    /// window's labels on a restart.
    label_bound: f64,
    /// `window.half_life_samples`: the forgetting clock ([`forget`]); the progressive loss divides
    /// each sample's loss by its factor.
    pub decay: Option<forget::Decay>,
}

impl LearnerCore {
    /// A core with an empty window, or resumed from `state` (window, counters, certificate); the
    /// samples are moved out of `state`, the adapter's parts (`scale`, `primal`) stay in it.
    pub fn new(
        config: LearnerConfig,
        capacity: usize,
        state: Option<&mut LearnerState>,
    ) -> LearnerCore {
        let rng =
            ChaCha8Rng::seed_from_u64(config.seed ^ state.as_ref().map_or(0, |s| s.stats.steps));
        let mut core = LearnerCore {
            config,
            window: Window::new(capacity),
            stats: LearnerStats::default(),
            last_certificate: None,
            inserted_since_certificate: false,
            steps_since_insert: 0,
            rng,
            best: None,
            polish: polish::PublishPolish::default(),
            label_bound: 0.0,
            decay: None,
        };
        core.decay = core
            .config
            .half_life_samples
            .map(|h| forget::Decay::new(h, capacity));
        if let Some(state) = state {
            if state.samples.len() > capacity {
                // A checkpoint of a larger window (`window.capacity` was lowered): the newest
                // `capacity` samples are kept, as the window would have kept them.
                let dropped = state.samples.len() - capacity;
                tracing::warn!(
                    learner = %core.config.name,
                    saved = state.samples.len(),
                    capacity,
                    dropped,
                    "checkpointed window larger than window.capacity: oldest samples dropped"
                );
                state.samples.drain(..dropped);
                // A changed state: published and checkpointed again.
                state.stats.mutations += 1;
            }
            // Moved, not copied: the window is the checkpoint's largest part.
            core.window = Window::from_oldest_first(capacity, std::mem::take(&mut state.samples));
            core.stats = state.stats;
            core.last_certificate = state.last_certificate;
            core.steps_since_insert = state.steps_since_insert;
            core.label_bound = (0..core.window.len())
                .map(|i| core.window.row(i).label.abs())
                .fold(0.0, f64::max);
        }
        core
    }

    /// The blocks a step chooses from: `config.blocks`, at most one per sample.
    pub fn blocks(&self) -> usize {
        self.config.blocks.clamp(1, self.window.len().max(1))
    }

    /// Why the next step should not run: an empty window, a last certificate that met `tol` with nothing
    /// new since, or [`IDLE_EPOCHS`] epochs without new data (a non-smooth loss may never close the gap
    /// exactly).
    pub fn idle(&self) -> Option<Idle> {
        if self.window.is_empty() {
            return Some(Idle::EmptyWindow);
        }
        if let (Some(c), false) = (self.last_certificate, self.inserted_since_certificate) {
            if c.relative_gap() <= self.config.tol {
                return Some(Idle::Converged {
                    relative_gap: c.relative_gap(),
                });
            }
        }
        if self.steps_since_insert >= IDLE_EPOCHS * self.blocks() as u64 {
            return Some(Idle::Stalled);
        }
        None
    }

    /// The start of a step: why the learner idles, or `None` with `block` set to the window rows of the
    /// block to work on ([`LearnerCore::next_block`]).
    pub fn begin_step(&mut self, block: &mut Vec<usize>) -> Option<Idle> {
        if let Some(idle) = self.idle() {
            return Some(idle);
        }
        let rows = self.next_block();
        block.clear();
        block.extend(rows);
        None
    }

    /// The window rows of the next step: a uniformly random one of [`LearnerCore::blocks`] contiguous
    /// blocks (the whole window with one block).
    pub fn next_block(&mut self) -> std::ops::Range<usize> {
        let (n, blocks) = (self.window.len(), self.blocks());
        let b = if blocks == 1 {
            0
        } else {
            self.rng.gen_range(0..blocks)
        };
        b * n / blocks..(b + 1) * n / blocks
    }

    /// Counts the progressive loss of a sample with `label` and `weight` that the model before it
    /// scored `score`, where `value` is the loss at `score`: the loss is taken at the score bounded by
    /// [`LearnerCore::bounded_score`], so one divergent prediction adds a bounded amount to the
    /// average, which the samples after it dilute (it stayed at 2.28e60 for good, checkpoints
    /// included, when one prediction had run away). A bounded score never costs more than the raw
    /// one: the label lies inside the bound.
    pub fn predicted_score(&mut self, label: f64, weight: f64, score: f64, value: f64) {
        self.predicted_served(label, weight, score, value, None);
    }

    /// [`LearnerCore::predicted_score`] for a sample whose prediction may have been served before its
    /// label was known (late labels): then its progressive loss is that of the `served` score, the
    /// prediction a client acted on (River's delayed progressive validation), not that of `score`,
    /// the model's now.
    pub fn predicted_served(
        &mut self,
        label: f64,
        weight: f64,
        score: f64,
        value: f64,
        served: Option<f64>,
    ) {
        let (score, value) = match served {
            Some(u) if u != score => (u, self.config.loss.sample(label, weight).value(u)),
            _ => (score, value),
        };
        let bounded = self.bounded_score(label, score);
        let value = if bounded == score {
            value
        } else {
            self.config.loss.sample(label, weight).value(bounded)
        };
        self.predicted(value);
    }

    /// The score progressive validation charges a sample with `label` for: `score` clamped to
    /// `[-B, B]`, `B` = [`PROGRESSIVE_SCORE_BOUND`] for the classification losses (labels +-1; as
    /// Vowpal Wabbit clamps its predictions), and for squared loss the largest `|label|` this learner
    /// has seen (this one's included, so the clamp can only lower the loss; as VW clamps regression
    /// predictions to the label range seen). NaN stays NaN (a numeric fault).
    pub fn bounded_score(&mut self, label: f64, score: f64) -> f64 {
        let bound = if self.config.loss.is_classification() {
            PROGRESSIVE_SCORE_BOUND
        } else {
            self.label_bound = self.label_bound.max(label.abs());
            self.label_bound
        };
        score.clamp(-bound, bound)
    }

    /// Counts a sample's loss under the model before it was learned (progressive validation). A
    /// non-finite loss is a numeric fault: counted, and left out of the average (which it would
    /// otherwise turn into infinity or NaN for good).
    pub fn predicted(&mut self, loss: f64) {
        // With forgetting the sample was given its factor's weight: the loss at its own weight.
        let loss = match &self.decay {
            Some(d) => loss / d.factor(self.stats.samples_seen),
            None => loss,
        };
        self.stats.samples_seen += 1;
        let sum = self.stats.progressive_loss_sum + loss;
        if sum.is_finite() {
            self.stats.progressive_loss_sum = sum;
            self.stats.progressive_count += 1;
        } else {
            self.stats.numeric_faults += 1;
        }
    }

    /// Counts an insert: the state changed and the last certificate no longer tells convergence.
    pub fn inserted(&mut self) {
        self.stats.mutations += 1;
        self.inserted_since_certificate = true;
        self.steps_since_insert = 0;
    }

    /// Counts a step that learned from samples inserted since the last ones (the primal learners'
    /// deferred intake): a step and a change of state, but not a pass over an unchanged window, so it
    /// does not bring the learner nearer to [`Idle::Stalled`].
    pub fn learned_new(&mut self) {
        self.stats.steps += 1;
        self.stats.mutations += 1;
    }

    /// Counts a step.
    pub fn stepped(&mut self) {
        self.stats.steps += 1;
        self.stats.mutations += 1;
        self.steps_since_insert += 1;
    }

    /// Records a certificate and the model it certifies as the learner's published view.
    pub fn certified(&mut self, model: Model) -> LearnerSnapshot {
        self.best = None;
        self.last_certificate = Some(model.certificate);
        self.inserted_since_certificate = false;
        self.view(model)
    }

    /// `model` polished on its support over the window when [`polish`]'s budget allows (SDIHT's
    /// models: the polish solves their problem, the k-sparse one with a ridge term).
    pub fn polished(&mut self, model: Model) -> Model {
        self.polish.apply(&self.config, &self.window, model)
    }

    /// [`LearnerCore::certified`], publishing the better of `model` and the model published last when
    /// no sample entered or left the window between them. The steps make the dual monotone, not the
    /// primal: on a window that stopped changing, the iterate's `P` can rise and fall by far more than
    /// its gap (held-out accuracy 95.6-99.2% between snapshots a few seconds apart on the W3-like
    /// stream). Both certificates bound the same problem, so the kept model's primal stands against
    /// the larger of the two duals (weak duality: every feasible dual is below every primal).
    pub fn certified_best(&mut self, model: Model) -> LearnerSnapshot {
        let unchanged = !self.inserted_since_certificate;
        let model = match self.best.take() {
            Some(mut best) if unchanged && best.certificate.primal < model.certificate.primal => {
                let (kept, new) = (best.certificate, model.certificate);
                best.certificate =
                    Certificate::new(kept.primal, kept.dual.max(new.dual), kept.samples);
                best
            }
            _ => model,
        };
        // The learner's own model is kept, not the view of it (which may be the empty model).
        let kept = model.clone();
        let snapshot = self.certified(model);
        self.best = Some(kept);
        snapshot
    }

    /// The published view of `model` with the current counters (records nothing): the empty model
    /// instead when the learner stalled above it ([`LearnerCore::empty_fallback`]), with the convergence record
    /// ([`crate::model::Convergence`]: `converged` when the relative gap meets `tol`, else `stalled`
    /// once the learner idles after [`IDLE_EPOCHS`], else `running`).
    pub fn view(&self, model: Model) -> LearnerSnapshot {
        // Only a learner that stopped stepping falls back: while it runs, its iterate may pass
        // through models worse than `w = 0` on its way (SMIDAS and mirror do, early on).
        let stalled = matches!(self.idle(), Some(Idle::Stalled));
        let (mut model, empty) = if stalled {
            self.empty_fallback(model)
        } else {
            (model, false)
        };
        let reason = if stalled { "stalled" } else { "running" };
        model.convergence = Some(crate::model::Convergence::new(
            &model.certificate,
            reason,
            self.config.tol,
            empty,
        ));
        LearnerSnapshot {
            model,
            stats: self.stats,
            window_samples: self.window.len(),
        }
    }

    /// `model`, or the empty model (`w = 0`, with the intercept's best value for `w = 0` when the
    /// learner has one) when that has the lower objective over the window, certified against the same
    /// dual (a lower bound for every k-sparse model); `true` with the empty model. A learner that
    /// stalled above the empty model (values of very different magnitudes can stall it there: primal
    /// 4.24e12 against 6.65e11 for `w = 0`) so serves `w = 0` and says so ([`LearnerCore::view`]). Not for a cluster's
    /// global model (certified over other windows) nor the subset learner's (another objective).
    /// O(window): rows are read for their label and weight only.
    pub fn empty_fallback(&self, model: Model) -> (Model, bool) {
        if model.cluster.is_some() || model.lambda0.is_some() || self.window.is_empty() {
            return (model, false);
        }
        let (b, empty) = empty_model_primal(&self.window, &self.config);
        let c = model.certificate;
        if !(empty.is_finite() && empty < c.primal) {
            return (model, false);
        }
        let mut model = model;
        model.support.clear();
        model.weights.clear();
        model.intercept = b;
        model.certificate = Certificate::new(empty, c.dual, c.samples);
        (model, true)
    }

    /// The checkpoint payload: the core's part, with the adapter's step scale and primal model.
    pub fn state(&self, scale: f64, primal: Option<PrimalState>) -> LearnerState {
        LearnerState {
            samples: self.window.to_pairs(),
            stats: self.stats,
            last_certificate: self.last_certificate,
            scale,
            intercept: 0.0,
            steps_since_insert: self.steps_since_insert,
            primal,
            auto: None,
        }
    }
}
