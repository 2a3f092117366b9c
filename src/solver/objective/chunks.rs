//! A certificate's walk cut in two chunks of rows, each scattering into its own `w~`, for a caller
//! that hands the certificate a [`Spread`] ([`super::CertificateScratch::spread`]: `fit`, whose
//! second core is idle while its search certifies). The sums are those of the walk in turn, added
//! chunk by chunk in order (the chunks' loss sums, their conjugate sums, the second `w~` into the first),
//! so they move in the last bits against it, and are the same whoever walks the chunks.
//!
//! Why two and not [`crate::solver::spread::chunks_of`]'s eight: each chunk scatters into a `w~` of
//! its own, `8 d` bytes a lane (16 MiB at d = 2^20 with two lanes), so more chunks cost more memory
//! than two cores can use.

use std::sync::Mutex;

use super::{neutral, zeroed_dense, Walk};
use crate::sample::SampleSet;
use crate::solver::spread::{chunk, map, own, Spread, MIN_CHUNK_ROWS};

/// The chunks a certificate's walk over `rows` rows is cut into when its caller spreads it: two above
/// [`MIN_CHUNK_ROWS`] rows, else one (the walk in turn).
pub(super) fn certificate_chunks(rows: usize) -> usize {
    if rows > MIN_CHUNK_ROWS {
        2
    } else {
        1
    }
}

impl<S: SampleSet> Walk<'_, S> {
    /// [`Walk::in_turn`] in two chunks walked by `spread`: the first chunk scatters into `w_tilde`, the
    /// second into `w_tilde_chunk`, which is then added into `w_tilde` (its written entries only).
    pub(super) fn in_chunks<const LANES: usize>(
        &self,
        spread: &dyn Spread,
        (alpha_from_primal, projected, w_tilde, w_tilde_chunk): (
            &mut Vec<f64>,
            &mut Vec<f64>,
            &mut [f64],
            &mut Vec<f64>,
        ),
    ) -> (f64, [f64; 2]) {
        const CHUNKS: usize = 2;
        let rows = self.data.len();
        zeroed_dense(w_tilde_chunk, w_tilde.len());
        alpha_from_primal.clear();
        alpha_from_primal.resize(rows, 0.0);
        let first = {
            let (alpha_0, alpha_1) = alpha_from_primal.split_at_mut(chunk(rows, CHUNKS, 0).end);
            let parts = [
                Mutex::new((alpha_0, &mut *w_tilde)),
                Mutex::new((alpha_1, &mut w_tilde_chunk[..])),
            ];
            map(spread, CHUNKS, |c| {
                let mut part = own(&parts[c]);
                let (alpha, w_tilde) = &mut *part;
                let mut conjugates = [neutral(); 2];
                let range = chunk(rows, CHUNKS, c);
                let loss_sum = self.first_walk::<LANES>(range, alpha, w_tilde, &mut conjugates);
                (loss_sum, conjugates)
            })
        };
        let mut loss_sum = 0.0;
        let mut conjugates = [neutral(); 2];
        let add = |sums: &mut [f64; 2], chunk: [f64; 2]| {
            sums[0] += chunk[0];
            sums[1] += chunk[1];
        };
        for (chunk_loss, chunk_conjugates) in first {
            loss_sum += chunk_loss;
            add(&mut conjugates, chunk_conjugates);
        }
        if self.intercept.is_some() {
            self.project(alpha_from_primal, projected, spread);
            let duals = (&alpha_from_primal[..], &projected[..]);
            let parts = [
                Mutex::new(&mut *w_tilde),
                Mutex::new(&mut w_tilde_chunk[..]),
            ];
            let second = map(spread, CHUNKS, |c| {
                let mut w_tilde = own(&parts[c]);
                let mut conjugates = [neutral(); 2];
                self.scatter_walk::<LANES>(
                    chunk(rows, CHUNKS, c),
                    duals,
                    &mut w_tilde,
                    &mut conjugates,
                );
                conjugates
            });
            for chunk_conjugates in second {
                add(&mut conjugates, chunk_conjugates);
            }
        }
        // Only the entries the second chunk wrote are added: its untouched pages are read as zeros and
        // never written, so they take no memory.
        for (target, &v) in w_tilde.iter_mut().zip(w_tilde_chunk.iter()) {
            if v != 0.0 {
                *target += v;
            }
        }
        (loss_sum, conjugates)
    }
}
