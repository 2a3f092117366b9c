//! One-vs-rest on a stream: a `[[learner]]` table with `classes = C` (3 to
//! [`MAX_CLASSES`](crate::model::multiclass::MAX_CLASSES)) runs as `C` binary learners, `NAME-0` ..
//! `NAME-{C-1}` (`config::learner` expands the table; [`ClassOf`] says which class each learns). Every
//! learner sees every sample, as any daemon learner does, and its worker thread ([`super::worker`])
//! rewrites each batch with [`relabel_into`]: `+1` for the learner's class, `-1` for the others
//! (liblinear's and Vowpal Wabbit's `--oaa` reduction, as `thresher fit --multiclass ovr` fits it
//! offline). So each class's learner is a whole binary learner — every solver, `lambda = "auto"`,
//! forgetting, the drift test, the publish gate, its metrics and its checkpoint work unchanged — and
//! `api::multiclass` serves the classes' models as one.
//!
//! Labels are the class indices `0..C-1`, checked at ingest (`ingest::batch::Rules::check_label`): a
//! body with any other label is refused whole, naming its line, before any learner sees it.
//!
//! **Certificate.** Each class keeps its own exact certificate over its window. The one-vs-rest
//! objective is the sum of the classes' objectives (they share no variable), so the sum of their gaps
//! bounds the whole model's suboptimality; it is what the multi-class model publishes. The sum (not the
//! max) because it is the bound of the objective the model minimises, and, every gap being `>= 0`, it
//! also bounds each class's gap.
//!
//! **Memory.** Each class's learner holds its own window (the samples are stored `C` times, with their
//! `±1` labels), so memory is `C` times a binary learner's, and the `C` learner threads share the cores.

#[cfg(doc)]
use super::params::ClassOf;
use crate::sample::SampleBlock;

/// `batch` as class `class`'s learner sees it, written into `out`: label `+1` for the samples of the
/// class, `-1` for the others (features, weights and served scores unchanged). The daemon's learner
/// of a class ([`crate::learner::params::ClassOf`]) takes every batch through it.
pub fn relabel_into(out: &mut SampleBlock, batch: &SampleBlock, class: usize) {
    out.clone_from(batch);
    for label in out.labels_mut() {
        *label = if *label == class as f64 { 1.0 } else { -1.0 };
    }
}

#[cfg(test)]
mod tests;
