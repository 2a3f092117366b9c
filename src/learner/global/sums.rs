//! Sums of sparse vectors for a cut: [`merge_add`] (two vectors, coordinate by coordinate: the
//! definition) and [`sum_sparse`] (any number, the same bits, in one pass each), which the proposer's
//! sum of the parts ([`super::cut_total`]) and a node's other nodes' part ([`super::RemoteSums`]) use.

/// The sum of sparse vectors (each in ascending index order), added in the order given: the same
/// bits as folding [`merge_add`] over them from an empty vector (a coordinate held by one vector keeps
/// its value; one held by several is `((v_1 + v_2) + v_3) ...` in their order; a sum that cancels
/// stays, as `0.0`), in one pass per vector into a dense accumulator and a bit mask of the coordinates
/// held. Why: a cut's parts hold most of `d = 2^20` coordinates each, and the fold's merges (a branch
/// per pair that the predictor loses, and a new vector per part) were the proposer's largest cost
/// of a cut after the window passes.
pub fn sum_sparse<'a>(
    vectors: impl IntoIterator<Item = &'a [(u32, f64)]> + Clone,
) -> Vec<(u32, f64)> {
    let dim = vectors
        .clone()
        .into_iter()
        .filter_map(|v| v.last())
        .map(|&(j, _)| j as usize + 1)
        .max()
        .unwrap_or(0);
    let mut total = vec![0.0f64; dim];
    let mut held = vec![0u64; dim.div_ceil(64)];
    let mut count = 0;
    for v in vectors {
        for &(j, x) in v {
            let (j, bit) = (j as usize, 1u64 << (j % 64));
            if held[j / 64] & bit != 0 {
                total[j] += x;
            } else {
                held[j / 64] |= bit;
                total[j] = x;
                count += 1;
            }
        }
    }
    let mut out = Vec::with_capacity(count);
    for (w, &word) in held.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            let j = w * 64 + bits.trailing_zeros() as usize;
            out.push((j as u32, total[j]));
            bits &= bits - 1;
        }
    }
    out
}

/// `a + b` for two sparse vectors in ascending index order (each coordinate `a_j + b_j`, in that
/// order, so the result's bits depend only on the order of the operands): the definition that
/// [`sum_sparse`] and [`super::RemoteSums::without`] compute faster, and which their tests hold them to.
pub fn merge_add(a: &[(u32, f64)], b: &[(u32, f64)]) -> Vec<(u32, f64)> {
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    merge_with(a, b, |j, x, y| {
        let v = match (x, y) {
            (Some(x), Some(y)) => x + y,
            (x, y) => x.or(y).unwrap_or(0.0),
        };
        out.push((j, v));
    });
    out
}

/// Walks two sparse vectors in ascending index order, calling `each(j, a_j, b_j)` once for every
/// coordinate either holds, in index order (`None` where one does not hold it).
pub(super) fn merge_with(
    a: &[(u32, f64)],
    b: &[(u32, f64)],
    mut each: impl FnMut(u32, Option<f64>, Option<f64>),
) {
    let (mut i, mut k) = (0, 0);
    while i < a.len() && k < b.len() {
        let ((ja, va), (jb, vb)) = (a[i], b[k]);
        if ja < jb {
            each(ja, Some(va), None);
            i += 1;
        } else if jb < ja {
            each(jb, None, Some(vb));
            k += 1;
        } else {
            each(ja, Some(va), Some(vb));
            i += 1;
            k += 1;
        }
    }
    a[i..].iter().for_each(|&(j, v)| each(j, Some(v), None));
    b[k..].iter().for_each(|&(j, v)| each(j, None, Some(v)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_add_sums_the_common_indices_and_keeps_the_others() {
        let a = [(1, 1.0), (4, 2.0)];
        let b = [(0, 0.5), (4, -2.0), (9, 3.0)];
        assert_eq!(
            merge_add(&a, &b),
            vec![(0, 0.5), (1, 1.0), (4, 0.0), (9, 3.0)]
        );
        assert_eq!(merge_add(&[], &b), b.to_vec());
    }
}
