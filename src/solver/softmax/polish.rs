//! The last step of a shared-support fit: `P(W, b)` minimised over the weights of the rows the search
//! chose (and the intercepts), by damped Newton on the `(|S| + 1) C` variables, kept by the caller
//! when its `P` is lower. The search's `W = H_k(W~)` is the restricted optimum only at the restricted
//! dual optimum; where the k-sparse gap stalls (near-tied rows trading places) the primal on the final
//! support is left unconverged, and this closes it. The certificate stays valid: the dual is a lower
//! bound for every k-row-sparse model.

use super::certificate::{margins, primal_value};
use super::simplex::softmax;
use super::SoftmaxProblem;
use crate::sample::SampleSet;

/// The most variables (`(|S| + 1) C`) the dense Newton system is built for; larger models keep the
/// search's weights.
pub const MAX_VARIABLES: usize = 600;
/// Newton iterations, at most.
const MAX_NEWTON: usize = 50;

/// Minimises `P` over `weights` (`|S| x C`, on `support`) and `b` (when the problem has an
/// intercept), starting from the values given; returns the final `P`, or `None` (nothing changed)
/// when the model has more than [`MAX_VARIABLES`] variables.
pub fn polish<S: SampleSet>(
    problem: &SoftmaxProblem<S>,
    support: &[u32],
    weights: &mut [f64],
    b: &mut [f64],
) -> Option<f64> {
    let (c, k) = (problem.classes, support.len());
    let m = (k + 1) * c;
    if m > MAX_VARIABLES {
        return None;
    }
    let mut v: Vec<f64> = weights.iter().chain(b.iter()).copied().collect();
    let mut value = primal_value(problem, support, weights, b);
    let mut f = vec![0.0; k + 1];
    let (mut p, mut log_p, mut scores) = (vec![0.0; c], vec![0.0; c], vec![0.0; c]);
    for _ in 0..MAX_NEWTON {
        let u = margins(problem, support, &v[..k * c]);
        let mut grad = vec![0.0; m];
        let mut hess = vec![0.0; m * m];
        for i in 0..problem.data.len() {
            let row = problem.data.row(i);
            restricted(row.indices, row.values, support, &mut f[..k]);
            f[k] = if problem.intercept { 1.0 } else { 0.0 };
            for cl in 0..c {
                scores[cl] = u[i * c + cl] + v[k * c + cl];
            }
            softmax(&scores, &mut p, &mut log_p);
            let scale = row.weight / problem.n();
            let y = problem.class_of(i);
            for (a, &fa) in f.iter().enumerate().filter(|(_, &x)| x != 0.0) {
                for cl in 0..c {
                    let residual = p[cl] - if cl == y { 1.0 } else { 0.0 };
                    grad[a * c + cl] += scale * fa * residual;
                    let line = &mut hess[(a * c + cl) * m..(a * c + cl + 1) * m];
                    for (bb, &fb) in f.iter().enumerate().filter(|(_, &x)| x != 0.0) {
                        for cm in 0..c {
                            let h = if cl == cm { p[cl] } else { 0.0 } - p[cl] * p[cm];
                            line[bb * c + cm] += scale * fa * fb * h;
                        }
                    }
                }
            }
        }
        for a in 0..m {
            // The intercepts' direction `b + t 1` leaves `P` unchanged: a tiny ridge picks the
            // least-norm step there; without an intercept their rows are the identity (no step).
            let ridge = if a < k * c {
                problem.lambda
            } else if problem.intercept {
                1e-10
            } else {
                1.0
            };
            hess[a * m + a] += ridge;
            if a < k * c {
                grad[a] += problem.lambda * v[a];
            }
        }
        let norm = grad.iter().map(|g| g * g).sum::<f64>().sqrt();
        if norm.is_nan() || norm <= 1e-12 {
            break;
        }
        let Some(dir) = solve(hess, grad.clone(), m) else {
            break;
        };
        let slope: f64 = dir.iter().zip(&grad).map(|(d, g)| d * g).sum();
        if slope.is_nan() || slope <= 0.0 {
            break;
        }
        let mut t = 1.0;
        let mut moved = false;
        while t > 1e-10 {
            let trial: Vec<f64> = v.iter().zip(&dir).map(|(a, d)| a - t * d).collect();
            let tv = primal_value(problem, support, &trial[..k * c], &trial[k * c..]);
            if tv.is_finite() && tv <= value - 1e-4 * t * slope {
                let decrease = value - tv;
                (v, value, moved) = (trial, tv, true);
                if decrease <= 1e-15 * value.abs().max(1.0) {
                    t = 0.0;
                }
                break;
            }
            t *= 0.5;
        }
        if !moved || t == 0.0 {
            break;
        }
    }
    weights.copy_from_slice(&v[..k * c]);
    b.copy_from_slice(&v[k * c..]);
    Some(value)
}

/// `x` on the ascending `support` (zero where the row has no entry).
fn restricted(indices: &[u32], values: &[f64], support: &[u32], out: &mut [f64]) {
    out.iter_mut().for_each(|v| *v = 0.0);
    let (mut a, mut s) = (0, 0);
    while a < indices.len() && s < support.len() {
        match indices[a].cmp(&support[s]) {
            std::cmp::Ordering::Less => a += 1,
            std::cmp::Ordering::Greater => s += 1,
            std::cmp::Ordering::Equal => {
                out[s] = values[a];
                a += 1;
                s += 1;
            }
        }
    }
}

/// `A x = r` by Gaussian elimination with partial pivoting (`A` row-major `m x m`); `None` when a
/// pivot vanishes or the result is not finite.
fn solve(mut a: Vec<f64>, mut r: Vec<f64>, m: usize) -> Option<Vec<f64>> {
    for col in 0..m {
        let pivot =
            (col..m).max_by(|&x, &y| a[x * m + col].abs().total_cmp(&a[y * m + col].abs()))?;
        let head = a[pivot * m + col].abs();
        if head.is_nan() || head == 0.0 {
            return None;
        }
        if pivot != col {
            for j in 0..m {
                a.swap(col * m + j, pivot * m + j);
            }
            r.swap(col, pivot);
        }
        let diagonal = a[col * m + col];
        for row in col + 1..m {
            let factor = a[row * m + col] / diagonal;
            if factor != 0.0 {
                for j in col..m {
                    a[row * m + j] -= factor * a[col * m + j];
                }
                r[row] -= factor * r[col];
            }
        }
    }
    let mut x = vec![0.0; m];
    for row in (0..m).rev() {
        let s: f64 = (row + 1..m).map(|j| a[row * m + j] * x[j]).sum();
        x[row] = (r[row] - s) / a[row * m + row];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}
