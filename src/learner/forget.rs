//! Forgetting (`window.half_life_samples`): on top of the window's hard capacity, a sample's weight
//! halves every `h` newer samples, so the objective a learner solves and certifies is the weighted
//! mean with weights `c_i 2^{-(age_i)/h}` over its window.
//!
//! **How, exactly and cheaply.** Old weights never change between renormalisations: sample number `s`
//! (the learner's `samples_seen` when it arrives) enters with weight `c_s 2^{(s mod R)/h}`, where the
//! period `R = P h` is a whole number `P` of half-lives ([`Decay::period_lives`]: at least the window,
//! so the renormalisation costs O(1) a sample amortised, at least 32, at most [`MAX_HALF_LIVES`]). Only
//! ratios of weights matter to the weighted mean, so this is the objective above. When the first sample
//! of a new period is about to enter ([`Decay::split`] cuts an insert there), every weight in the learner
//! is multiplied by `2^{-P}` — a power of two, so every product is exact — together with every dual
//! (a dual scales with its weight: `l_i*(a) = c_i l*(a / c_i)`, so `alpha_i / c_i` is unchanged) and the
//! primal learners' running `max c_i ||x_i||^2`; the learner is rebuilt from that state, the path a
//! checkpoint restore takes ([`rescale`]), so every solver's sums are recomputed from the window. The
//! weighted mean, the model and the certificate are unchanged by it. After a restart `samples_seen`
//! gives the same periods, so nothing more is checkpointed.
//!
//! **Progressive loss.** A learner charges a sample the loss at the weight it was given; the core
//! divides that by the sample's factor ([`Decay::factor`]), so the progressive loss (and the drift test
//! that reads it) is the loss at the sample's own weight, as without forgetting.
//!
//! Not with a cluster's global model (refused by the configuration): the nodes' windows would need one
//! sequence.

use crate::learner::{build, LearnerState, StreamingLearner};
use crate::sample::SampleBlock;

/// The most half-lives a window may span (`window.capacity <= MAX_HALF_LIVES * h`), and the longest
/// period: weights then stay within `2^{+-512}` of the user's, far inside the floating-point range.
pub const MAX_HALF_LIVES: u64 = 256;

/// A learner's forgetting clock: the half-life and the renormalisation period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decay {
    /// `h`, in samples.
    pub half_life: u64,
    /// `P`: half-lives per period.
    pub period_lives: u64,
}

impl Decay {
    /// The clock of a learner with a window of `capacity` samples.
    pub fn new(half_life: u64, capacity: usize) -> Decay {
        let lives = (capacity as u64)
            .div_ceil(half_life.max(1))
            .clamp(32, MAX_HALF_LIVES);
        Decay {
            half_life: half_life.max(1),
            period_lives: lives,
        }
    }

    /// `R = P h`, in samples.
    pub fn period(&self) -> u64 {
        self.period_lives * self.half_life
    }

    /// The factor of sample number `s`: `2^{(s mod R) / h}`.
    pub fn factor(&self, s: u64) -> f64 {
        ((s % self.period()) as f64 / self.half_life as f64).exp2()
    }

    /// The rows of `blocks` cut where a period starts, each part with every weight multiplied by its
    /// sample's factor (`seen`: the learner's samples before the first row), and whether the learner
    /// must be renormalised ([`rescale`]) before that part.
    /// The scores served before late labels ([`SampleBlock::served`]) go with their rows.
    pub fn split(&self, seen: u64, blocks: &[&SampleBlock]) -> Vec<(bool, SampleBlock)> {
        let width = blocks.iter().map(|b| b.served_width()).max().unwrap_or(0);
        let mut parts: Vec<(bool, SampleBlock, Vec<f64>)> = Vec::new();
        let mut s = seen;
        for block in blocks {
            for i in 0..block.len() {
                let starts = s > 0 && s.is_multiple_of(self.period());
                if starts || parts.is_empty() {
                    parts.push((starts, SampleBlock::new(), Vec::new()));
                }
                let mut sample = block.get(i);
                sample.weight = Some(sample.weight.unwrap_or(1.0) * self.factor(s));
                let (_, part, served) = parts.last_mut().expect("a part");
                part.push_ref(sample);
                served.extend((0..width).map(|slot| block.served(i, slot).unwrap_or(f64::NAN)));
                s += 1;
            }
        }
        parts
            .into_iter()
            .map(|(starts, mut part, served)| {
                if width > 0 {
                    part.set_served(width, served);
                }
                (starts, part)
            })
            .collect()
    }

    /// What each period's renormalisation multiplies by: `2^{-P}`.
    pub fn renormaliser(&self) -> f64 {
        (-(self.period_lives as f64)).exp2()
    }
}

/// Multiplies every weight, dual and `max c_i ||x_i||^2` of a learner's state by `factor`.
pub fn scale_state(state: &mut LearnerState, factor: f64) {
    for (sample, alpha) in &mut state.samples {
        sample.weight = Some(sample.weight.unwrap_or(1.0) * factor);
        *alpha *= factor;
    }
    if let Some(p) = &mut state.primal {
        p.row_sq_max *= factor;
    }
}

/// Renormalises a learner at the start of a period: its state scaled by [`Decay::renormaliser`], and
/// the learner rebuilt from it.
pub fn rescale(learner: &mut Box<dyn StreamingLearner>, decay: &Decay) {
    let (config, capacity) = (learner.config().clone(), learner.window().capacity());
    let mut state = learner.state();
    scale_state(&mut state, decay.renormaliser());
    *learner = build(&config, capacity, Some(state));
}

/// Inserts `blocks` into a learner that forgets: cut at the periods' starts, weighted, and
/// renormalised at each start.
pub fn insert(learner: &mut Box<dyn StreamingLearner>, decay: &Decay, blocks: &[&SampleBlock]) {
    let seen = learner.stats().samples_seen;
    for (renormalise, part) in decay.split(seen, blocks) {
        if renormalise {
            rescale(learner, decay);
        }
        learner.insert(&part);
    }
}

#[cfg(test)]
mod tests;
