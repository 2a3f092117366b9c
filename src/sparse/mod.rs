//! Sparse linear-algebra kernels: the inner loops every solver spends its time in.
//!
//! All kernels are plain `f64` loops over borrowed slices; none allocates. A sample row is a pair of
//! parallel slices (`indices`, `values`) with strictly increasing indices; weight vectors are dense
//! `&[f64]` of length `d` (the largest feature index seen plus one).
//!
//! `hard_threshold` is the operator `H_k` of the DIHT paper (dual-iht.md, Sec. 2, "w(alpha) = H_k(w~)"):
//! keep the `k` entries largest in magnitude, zero the rest.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A memory hint for a dense buffer just reserved, given its address and size in bytes. The process
/// installs one at start ([`set_dense_advice`]: the binary installs `sys::advise_huge_pages`); until
/// then there is none, so this module itself makes no system call.
static DENSE_ADVICE: std::sync::OnceLock<fn(*const u8, usize)> = std::sync::OnceLock::new();

/// Installs the hint [`reserve_dense`] gives for every buffer it grows (the first call wins).
pub fn set_dense_advice(advice: fn(*const u8, usize)) {
    let _ = DENSE_ADVICE.set(advice);
}

/// Hands `v`'s allocation to the installed memory hint ([`set_dense_advice`]) before its pages are
/// first written: for a large buffer read at random rows other than a d-vector (a data set's columns,
/// read in a shuffled order by an epoch), allocated zeroed and not yet touched.
pub fn advise<T>(v: &[T]) {
    if let Some(advice) = DENSE_ADVICE.get() {
        advice(v.as_ptr().cast(), std::mem::size_of_val(v));
    }
}

/// Makes room in `v` for `len` elements and hands the new allocation to the installed memory hint
/// ([`set_dense_advice`]; the binary's asks Linux for transparent huge pages). Call it before the new
/// room is first written (e.g. before `resize`): pages are then faulted in 2 MiB at a time.
///
/// Why: the solvers' dense d-vectors (`z`, `w`, the warm start's `dz`, the certificate's `w~`; 8-16 MiB
/// each at d = 2^20) are read and written at random coordinates, so with 4 KiB pages nearly every
/// access is a TLB miss as well as a cache miss — 2 048 pages per vector against a TLB of ~1 500
/// entries; 2 MiB pages cover all of them with a handful.
pub fn reserve_dense<T>(v: &mut Vec<T>, len: usize) {
    if v.capacity() >= len {
        return;
    }
    v.reserve_exact(len - v.len());
    if let Some(advice) = DENSE_ADVICE.get() {
        advice(v.as_ptr().cast(), v.capacity() * std::mem::size_of::<T>());
    }
}

/// Grows `v` to `len` entries, the new ones zero, in amortised O(1) per entry (the capacity at least
/// doubles) and **without writing the new room**: a growth past the capacity moves `v` into a fresh
/// zeroed allocation (`vec![0.0; cap]`, i.e. `calloc`), whose pages the kernel maps to its shared zero
/// page until first written, so they cost no resident memory. Why: a dense vector is sized by the
/// largest feature index seen, and one sample with a large index (`1 16777215:1`, 14 bytes) made every
/// learner's `z`, `w` and the certificate's `w~` resident in full — ~800 MB; now only the pages of the
/// coordinates actually written become resident. Keep the untouched room untouched afterwards: zero
/// with [`zero_dense`], not `fill(0.0)`. A shorter `len` leaves `v` as it is.
pub fn grow_dense(v: &mut Vec<f64>, len: usize) {
    if v.len() >= len {
        return;
    }
    if v.capacity() < len {
        let capacity = len.max(v.capacity().saturating_mul(2));
        let mut fresh = vec![0.0f64; capacity];
        fresh[..v.len()].copy_from_slice(v);
        fresh.truncate(len);
        if let Some(advice) = DENSE_ADVICE.get() {
            advice(
                fresh.as_ptr().cast(),
                fresh.capacity() * std::mem::size_of::<f64>(),
            );
        }
        *v = fresh;
    } else {
        // Room this vector already had (written before, or part of its own zeroed allocation).
        v.resize(len, 0.0);
    }
}

/// Sets every entry of `v` to `+0.0`, writing only the entries that are not already `+0.0`: a page
/// never written stays unbacked (see [`grow_dense`]). O(len) reads, like the `fill` it replaces.
pub fn zero_dense(v: &mut [f64]) {
    for x in v.iter_mut() {
        if x.to_bits() != 0 {
            *x = 0.0;
        }
    }
}

/// Makes `v` exactly `len` zeros ([`zero_dense`] then [`grow_dense`]): a scratch vector reset for reuse
/// without making its untouched pages resident.
pub fn zeroed_dense(v: &mut Vec<f64>, len: usize) {
    v.truncate(len);
    zero_dense(v);
    grow_dense(v, len);
}

/// `x . w` for a sparse row `x` and a dense `w`.
///
/// Indices beyond `w.len()` contribute zero: a feature the model has never seen has weight 0.
#[inline]
pub fn sparse_dot(indices: &[u32], values: &[f64], w: &[f64]) -> f64 {
    let mut acc = 0.0;
    for (&j, &v) in indices.iter().zip(values) {
        if let Some(&wj) = w.get(j as usize) {
            acc += v * wj;
        }
    }
    acc
}

/// `start + x . w` for a sparse row `x` and a sparse `w` (`support` with `weights` parallel to it), both
/// with ascending indices: a merge walk, O(nnz + k), reading neither side at random. The terms are
/// added to `start` in index order.
#[inline]
pub fn merge_dot(
    start: f64,
    indices: &[u32],
    values: &[f64],
    support: &[u32],
    weights: &[f64],
) -> f64 {
    let (mut i, mut j, mut acc) = (0, 0, start);
    while i < indices.len() && j < support.len() {
        match indices[i].cmp(&support[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                acc += values[i] * weights[j];
                i += 1;
                j += 1;
            }
        }
    }
    acc
}

/// `w . x` for a sparse row `x` and a `w` that is zero outside the bits set in `mask` (bit `j % 64` of
/// word `j / 64`; `mask` must cover every index of the row): the same sum as [`sparse_dot`], bit for
/// bit, with `w` read only where its bit is set, so the 8d-byte `w` is only read on the support and
/// the d/8-byte mask stays in cache.
///
/// Branch-free: a term off the mask adds `v * 0.0 = ±0.0`, which leaves the accumulator unchanged
/// (it starts at `+0.0` and can never become `-0.0`), exactly as skipping it (or adding
/// `v * w_j = ±0.0`, as `sparse_dot` does) would. Whether a nonzero hits the support is a coin flip
/// the branch predictor loses; the select costs nothing.
#[inline]
pub fn masked_dot(indices: &[u32], values: &[f64], w: &[f64], mask: &[u64]) -> f64 {
    let mut acc = 0.0;
    for (&j, &v) in indices.iter().zip(values) {
        let j = j as usize;
        // All ones on the mask, else zero: off the mask, `w[0]` (cached) is read instead of `w[j]`
        // and its bits are cleared to `+0.0` (integer masking, which the compiler cannot turn back
        // into a branch).
        let keep = 0u64.wrapping_sub((mask[j / 64] >> (j % 64)) & 1);
        let w_j = w.get(j & keep as usize).map_or(0, |x| x.to_bits()) & keep;
        acc += v * f64::from_bits(w_j);
    }
    acc
}

/// Asks the CPU to bring `v[j]` into cache ahead of a read-modify-write (a hint: no effect on any
/// value; nothing on other targets or out of bounds). For scatters into d-vectors far larger than the
/// cache, where each update is otherwise a miss waited for in turn.
#[inline(always)]
pub fn prefetch<T>(v: &[T], j: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(x) = v.get(j) {
        // SAFETY: a prefetch never faults and changes no memory; the address is an element of `v`.
        unsafe {
            std::arch::x86_64::_mm_prefetch(
                (x as *const T).cast::<i8>(),
                std::arch::x86_64::_MM_HINT_T0,
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (v, j);
}

/// Asks the CPU to bring all of `v` into cache (a hint, as [`prefetch`]): for a row read a few rows
/// from now, when rows live in separate allocations the hardware prefetcher cannot follow.
#[inline(always)]
pub fn prefetch_all<T>(v: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        let start = v.as_ptr().cast::<i8>();
        let bytes = std::mem::size_of_val(v);
        // Every 64-byte line from the first byte to the last.
        let mut at = 0;
        while at < bytes {
            // SAFETY: a prefetch never faults and changes no memory; the address lies within `v`.
            unsafe {
                std::arch::x86_64::_mm_prefetch(
                    start.wrapping_add(at),
                    std::arch::x86_64::_MM_HINT_T0,
                )
            };
            at += 64;
        }
        if bytes > 0 {
            // SAFETY: as above; the last byte of `v`, whose line the stride may have stepped over.
            unsafe {
                std::arch::x86_64::_mm_prefetch(
                    start.wrapping_add(bytes - 1),
                    std::arch::x86_64::_MM_HINT_T0,
                )
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}

/// `y += a x` for a sparse row `x` and a dense `y` (indices must be `< y.len()`).
#[inline]
pub fn sparse_axpy(a: f64, indices: &[u32], values: &[f64], y: &mut [f64]) {
    for (&j, &v) in indices.iter().zip(values) {
        y[j as usize] += a * v;
    }
}

/// Squared Euclidean norm of a sparse row.
#[inline]
pub fn sparse_sq_norm(values: &[f64]) -> f64 {
    values.iter().map(|v| v * v).sum()
}

/// Reusable buffers for [`hard_threshold`], so the hot loop never allocates.
#[derive(Debug, Default, Clone)]
pub struct ThresholdScratch {
    order: Vec<u32>,
    /// Nonzero magnitudes, contiguous, for the quickselect path.
    magnitudes: Vec<f64>,
    /// The `k` best entries seen so far, worst on top: `Reverse((|v| bits, Reverse(index)))`.
    heap: BinaryHeap<Reverse<(u64, Reverse<u32>)>>,
    /// [`top_k_of_pairs`]'s heap (the same order, carrying each value's bits) and its result.
    pair_heap: BinaryHeap<Reverse<(u64, Reverse<u32>, u64)>>,
    pairs: Vec<(u32, f64)>,
    /// One lane of an interleaved vector, contiguous, for [`top_k_indices_of_two_lanes`]' large-k path.
    lane: Vec<f64>,
    /// [`extend_with_top_k_candidates`]' chunk maxima, and a copy to select in.
    chunk_largest: Vec<f64>,
    chunk_selected: Vec<f64>,
}

/// Up to this `k / d` ratio one pass with a `k`-element heap beats quickselect over all nonzeros.
const HEAP_MAX_K_FRACTION: usize = 16;

/// `H_k`: writes into `out` the `k` entries of `dense` largest in magnitude (all others zero) and
/// into `support` their indices in ascending order.
///
/// Ties are broken deterministically: among equal magnitudes the lower index wins. Exact zeros are
/// never selected, so the support can be smaller than `k` when `dense` has fewer than `k` nonzeros.
/// NaN entries are treated as zero. For `k <= d / 16` one pass keeps the `k` best entries in a heap
/// (O(d + k log k), and almost every entry costs one comparison with the current k-th magnitude);
/// otherwise expected O(d) by quickselect (`select_nth_unstable_by`). Both give the same result.
pub fn hard_threshold(
    dense: &[f64],
    k: usize,
    out: &mut Vec<f64>,
    support: &mut Vec<u32>,
    scratch: &mut ThresholdScratch,
) {
    zeroed_dense(out, dense.len());
    support.clear();
    select_top_k(dense, k, scratch);
    for &j in scratch.order.iter() {
        out[j as usize] = dense[j as usize];
    }
    support.extend_from_slice(&scratch.order);
}

/// [`hard_threshold`] for a caller that keeps `out` paired with `support` from call to call (as this
/// function leaves them: `out` zero outside `support`). Only the previous support is cleared, O(k)
/// instead of O(d) — the streaming learner thresholds a d = 2^20 vector several times per step.
/// If `out.len() != dense.len()` it is rebuilt from scratch.
pub fn hard_threshold_paired(
    dense: &[f64],
    k: usize,
    out: &mut Vec<f64>,
    support: &mut Vec<u32>,
    scratch: &mut ThresholdScratch,
) {
    // The previous support, when it has k nonzero entries in `dense`, bounds the k-th magnitude from
    // below: k entries reach its smallest, so nothing below it can be kept, and the scan skips every
    // chunk under it from the start instead of only once the heap has filled with better entries.
    let mut floor = 0.0;
    if out.len() == dense.len() {
        if support.len() == k {
            floor = support
                .iter()
                .map(|&j| dense[j as usize].abs())
                .fold(f64::INFINITY, |a, m| if m < a { m } else { a });
            // Zero or NaN among them (`!(m > 0)`): no bound.
            #[allow(clippy::neg_cmp_op_on_partial_ord)]
            if !(floor > 0.0) || floor.is_infinite() {
                floor = 0.0;
            }
        }
        for &j in support.iter() {
            out[j as usize] = 0.0;
        }
    } else {
        zeroed_dense(out, dense.len());
    }
    support.clear();
    select_top_k_at_least(dense, k, floor, scratch);
    for &j in scratch.order.iter() {
        out[j as usize] = dense[j as usize];
    }
    support.extend_from_slice(&scratch.order);
}

/// The indices (ascending) of the `k` entries of `dense` largest in magnitude: the support
/// [`hard_threshold`] picks (nonzero, not NaN, ties → lower index).
pub fn top_k_indices<'a>(dense: &[f64], k: usize, scratch: &'a mut ThresholdScratch) -> &'a [u32] {
    select_top_k(dense, k, scratch);
    &scratch.order
}

/// [`top_k_indices`] over `(index, value)` pairs with distinct indices in any order, by the same total
/// order (magnitude, then lower index); the kept pairs come back ascending by index. Why: `H_k` of a
/// vector that differs from a known one on a set `C` of coordinates is the top k of (the top k of the
/// coordinates outside `C`) ∪ `C`, so a caller that tries several values on `C` pays one dense pass,
/// then O(|C|) per try.
pub fn top_k_of_pairs(
    pairs: impl Iterator<Item = (u32, f64)>,
    k: usize,
    scratch: &mut ThresholdScratch,
) -> &[(u32, f64)] {
    let (heap, kept) = (&mut scratch.pair_heap, &mut scratch.pairs);
    heap.clear();
    kept.clear();
    if k == 0 {
        return kept;
    }
    for (j, v) in pairs {
        let m = v.abs();
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(m > 0.0) {
            continue;
        }
        // The value rides along; it never decides a comparison, indices being distinct.
        let entry = Reverse((m.to_bits(), Reverse(j), v.to_bits()));
        if heap.len() < k {
            heap.push(entry);
        } else if let Some(mut worst) = heap.peek_mut() {
            // `Reverse` flips the order: a better entry compares *less* than the worst kept one.
            if entry < *worst {
                *worst = entry;
            }
        }
    }
    kept.extend(
        heap.drain()
            .map(|Reverse((_, Reverse(j), v))| (j, f64::from_bits(v))),
    );
    kept.sort_unstable_by_key(|&(j, _)| j);
    kept
}

/// Leaves in `scratch.order` the indices of the `k` entries of `dense` largest in magnitude (nonzero,
/// not NaN; ties → lower index), ascending.
fn select_top_k(dense: &[f64], k: usize, scratch: &mut ThresholdScratch) {
    select_top_k_at_least(dense, k, 0.0, scratch);
}

/// [`select_top_k`] given that at least `k` entries of `dense` have magnitude `>= floor` (`0` when
/// nothing is known): chunks whose magnitudes all lie below `floor` cannot hold a kept entry (each
/// loses to those k) and are skipped. The kept set is the same.
fn select_top_k_at_least(dense: &[f64], k: usize, floor: f64, scratch: &mut ThresholdScratch) {
    scratch.order.clear();
    if k == 0 {
        return;
    }
    if k.saturating_mul(HEAP_MAX_K_FRACTION) <= dense.len() {
        let mut best = HeapTopK::new(&mut scratch.heap, k);
        for (c, chunk) in dense.chunks(SCAN_CHUNK).enumerate() {
            // Once the heap is full almost no entry beats the k-th magnitude: a chunk whose largest
            // magnitude does not is skipped after a branch-free max the compiler vectorizes.
            let largest = largest_magnitude(chunk);
            if largest < floor || best.rejects(largest) {
                continue;
            }
            for (o, &v) in chunk.iter().enumerate() {
                best.offer(c * SCAN_CHUNK + o, v);
            }
        }
        best.finish(&mut scratch.order);
    } else {
        select_top_k_by_quickselect(dense, k, &mut scratch.magnitudes, &mut scratch.order);
    }
}

/// [`select_top_k`]'s path for a large `k / d`: quickselect the k-th magnitude on a contiguous copy
/// (no indirection through an index array), then one scan in index order keeps everything above it
/// and the lowest-indexed ties. Leaves `order` ascending.
fn select_top_k_by_quickselect(
    dense: &[f64],
    k: usize,
    magnitudes: &mut Vec<f64>,
    order: &mut Vec<u32>,
) {
    magnitudes.clear();
    // `> 0.0` drops zeros and NaN.
    magnitudes.extend(dense.iter().map(|v| v.abs()).filter(|m| *m > 0.0));
    let (threshold, mut ties_to_keep) = if magnitudes.len() <= k {
        (0.0, usize::MAX)
    } else {
        let descending = |a: &f64, b: &f64| b.partial_cmp(a).unwrap_or(std::cmp::Ordering::Equal);
        let (above, kth, _) = magnitudes.select_nth_unstable_by(k - 1, descending);
        let kth = *kth;
        (kth, k - above.iter().filter(|m| **m > kth).count())
    };
    for (j, v) in dense.iter().enumerate() {
        let m = v.abs();
        if m > threshold {
            order.push(j as u32);
        } else if m == threshold && m > 0.0 && ties_to_keep > 0 {
            ties_to_keep -= 1;
            order.push(j as u32);
        }
    }
}

/// The `k` best entries offered so far, in index order (the heap path of [`select_top_k`]): each entry
/// must beat the worst kept one strictly, since every later entry has a higher index and loses ties.
struct HeapTopK<'a> {
    /// Worst on top: `Reverse((|v| bits, Reverse(index)))`.
    heap: &'a mut BinaryHeap<Reverse<(u64, Reverse<u32>)>>,
    k: usize,
    /// Magnitude bits of the worst kept entry once the heap is full.
    worst: u64,
}

impl<'a> HeapTopK<'a> {
    /// `k >= 1`.
    fn new(heap: &'a mut BinaryHeap<Reverse<(u64, Reverse<u32>)>>, k: usize) -> HeapTopK<'a> {
        heap.clear();
        HeapTopK { heap, k, worst: 0 }
    }

    /// Whether no entry of magnitude at most `largest` can enter any more.
    #[inline(always)]
    fn rejects(&self, largest: f64) -> bool {
        self.heap.len() == self.k && largest <= f64::from_bits(self.worst)
    }

    /// Offers entry `j` with value `v`; `j` must exceed every index offered before.
    #[inline(always)]
    fn offer(&mut self, j: usize, v: f64) {
        let m = v.abs();
        // `!(m > 0)` skips zeros and NaN; for non-negative floats the bit pattern orders as the value.
        #[allow(clippy::neg_cmp_op_on_partial_ord)]
        if !(m > 0.0) {
            return;
        }
        let bits = m.to_bits();
        if self.heap.len() < self.k {
            self.heap.push(Reverse((bits, Reverse(j as u32))));
            if self.heap.len() == self.k {
                self.worst = self.heap.peek().map_or(0, |e| e.0 .0);
            }
        } else if bits > self.worst {
            if let Some(mut top) = self.heap.peek_mut() {
                *top = Reverse((bits, Reverse(j as u32)));
            }
            self.worst = self.heap.peek().map_or(0, |e| e.0 .0);
        }
    }

    /// The kept indices, ascending, into `order`.
    fn finish(self, order: &mut Vec<u32>) {
        order.extend(self.heap.drain().map(|Reverse((_, Reverse(j)))| j));
        order.sort_unstable();
    }
}

/// [`top_k_indices`] of both lanes of an interleaved vector at once: entry `j` of lane `l` is
/// `lanes[2 j + l]`, and lane `l`'s kept indices come back in `scratch[l]`'s order (ascending), the
/// same as `top_k_indices` of that lane alone. Why: two d-vectors scattered into one interleaved
/// vector share each cache line (see `objective::fused_certificate`); one sweep then serves both.
pub fn top_k_indices_of_two_lanes<'a>(
    lanes: &[f64],
    k: usize,
    scratch: &'a mut [ThresholdScratch; 2],
) -> (&'a [u32], &'a [u32]) {
    let d = lanes.len() / 2;
    let [first, second] = &mut *scratch;
    first.order.clear();
    second.order.clear();
    if k == 0 {
        return (&scratch[0].order, &scratch[1].order);
    }
    if k.saturating_mul(HEAP_MAX_K_FRACTION) <= d {
        let mut best = [
            HeapTopK::new(&mut first.heap, k),
            HeapTopK::new(&mut second.heap, k),
        ];
        for (c, chunk) in lanes.chunks(2 * SCAN_CHUNK).enumerate() {
            // Eight running maxima over an interleaved chunk: the even ones are lane 0's.
            let largest = largest_magnitude_of_two_lanes(chunk);
            for (lane, best) in best.iter_mut().enumerate() {
                if best.rejects(largest[lane]) {
                    continue;
                }
                for (o, pair) in chunk.chunks_exact(2).enumerate() {
                    best.offer(c * SCAN_CHUNK + o, pair[lane]);
                }
            }
        }
        let [b0, b1] = best;
        b0.finish(&mut first.order);
        b1.finish(&mut second.order);
    } else {
        // Large k / d (small problems): each lane on its own, through a contiguous copy.
        for (lane, s) in [first, second].into_iter().enumerate() {
            let mut copy = std::mem::take(&mut s.lane);
            copy.clear();
            copy.extend(lanes.chunks_exact(2).map(|pair| pair[lane]));
            select_top_k_by_quickselect(&copy, k, &mut s.magnitudes, &mut s.order);
            s.lane = copy;
        }
    }
    (&scratch[0].order, &scratch[1].order)
}

/// [`largest_magnitude`] of each lane of an interleaved chunk (even length).
#[inline]
fn largest_magnitude_of_two_lanes(chunk: &[f64]) -> [f64; 2] {
    let mut lanes = [0.0f64; 8];
    let mut eights = chunk.chunks_exact(8);
    for eight in &mut eights {
        for (lane, v) in lanes.iter_mut().zip(eight) {
            let m = v.abs();
            *lane = if m > *lane { m } else { *lane };
        }
    }
    for (o, v) in eights.remainder().iter().enumerate() {
        let m = v.abs();
        lanes[o % 2] = if m > lanes[o % 2] { m } else { lanes[o % 2] };
    }
    let max = |a: f64, b: f64| if b > a { b } else { a };
    [
        max(max(lanes[0], lanes[2]), max(lanes[4], lanes[6])),
        max(max(lanes[1], lanes[3]), max(lanes[5], lanes[7])),
    ]
}

/// Appends to `out` every pair `(indices[m], v_m)`, `v_m = base[m] + t * step[m]` (computed exactly so),
/// that the top `k` of `known ∪ {all pairs}` can keep, given that `known` holds `k` entries of
/// magnitude `>= floor` (pass `floor = 0` otherwise): the pairs, in order, whose magnitude is at least
/// the larger of `floor` and `k`-th largest chunk maximum (NaN never; zeros only if that bound is 0,
/// for the top-k to skip). Why that is safe: an entry below either bound loses to `k` distinct
/// entries — the known ones, or one per chunk of the `k` largest chunk maxima — ties or not.
///
/// One branch-free pass the compiler vectorizes takes each chunk's largest magnitude; a selection
/// among the `|C| / 64` chunk maxima gives the bound; only chunks reaching it are scanned. For the
/// streaming warm start, whose top k of `z + t dz` over a batch's coordinates C this narrows from
/// `|C|` (up to d) heap offers to a few hundred.
#[allow(clippy::too_many_arguments)]
pub fn extend_with_top_k_candidates(
    indices: &[u32],
    base: &[f64],
    step: &[f64],
    t: f64,
    k: usize,
    floor: f64,
    out: &mut Vec<(u32, f64)>,
    scratch: &mut ThresholdScratch,
) {
    if k == 0 {
        return;
    }
    let largest = &mut scratch.chunk_largest;
    largest.clear();
    for (base, step) in base.chunks(SCAN_CHUNK).zip(step.chunks(SCAN_CHUNK)) {
        let mut lanes = [0.0f64; 8];
        let mut eights = base.chunks_exact(8).zip(step.chunks_exact(8));
        for (b, s) in &mut eights {
            for l in 0..8 {
                let m = (b[l] + t * s[l]).abs();
                // `>` is false for NaN, which therefore never wins.
                lanes[l] = if m > lanes[l] { m } else { lanes[l] };
            }
        }
        let tail = base.len() / 8 * 8;
        for (b, s) in base[tail..].iter().zip(&step[tail..]) {
            let m = (b + t * s).abs();
            lanes[0] = if m > lanes[0] { m } else { lanes[0] };
        }
        largest.push(lanes.iter().fold(0.0, |a, &b| if b > a { b } else { a }));
    }
    let mut bound = floor;
    if largest.len() >= k {
        let selected = &mut scratch.chunk_selected;
        selected.clear();
        selected.extend_from_slice(largest);
        // No NaN among the maxima, so `total_cmp` orders them as `<` does.
        let (_, kth, _) = selected.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a));
        bound = bound.max(*kth);
    }
    let chunks = indices
        .chunks(SCAN_CHUNK)
        .zip(base.chunks(SCAN_CHUNK).zip(step.chunks(SCAN_CHUNK)));
    for ((indices, (base, step)), &most) in chunks.zip(largest.iter()) {
        if most < bound {
            continue;
        }
        for ((&j, &b), &s) in indices.iter().zip(base).zip(step) {
            let v = b + t * s;
            if v.abs() >= bound {
                out.push((j, v));
            }
        }
    }
}

/// Entries per chunk of [`select_top_k`]'s skip test (512 bytes).
const SCAN_CHUNK: usize = 64;

/// The largest `|v|` in `chunk`, NaN ignored (so a chunk of NaN and zeros gives 0 and is skipped, as
/// its entries would be). Eight running maxima, so the loop has no dependency chain and vectorizes.
#[inline]
fn largest_magnitude(chunk: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut eights = chunk.chunks_exact(8);
    for eight in &mut eights {
        for (lane, v) in lanes.iter_mut().zip(eight) {
            let m = v.abs();
            // `>` is false for NaN, which therefore never wins.
            *lane = if m > *lane { m } else { *lane };
        }
    }
    for v in eights.remainder() {
        let m = v.abs();
        lanes[0] = if m > lanes[0] { m } else { lanes[0] };
    }
    lanes.iter().fold(0.0, |a, &b| if b > a { b } else { a })
}

/// Number of positions where two ascending supports differ (size of the symmetric difference).
pub fn support_changes(old: &[u32], new: &[u32]) -> usize {
    let (mut i, mut j, mut common) = (0, 0, 0);
    while i < old.len() && j < new.len() {
        match old[i].cmp(&new[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    old.len() + new.len() - 2 * common
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `grow_dense` keeps the contents, zeroes the new entries, at least doubles the capacity when it
    /// reallocates, and leaves the new room unbacked: after a growth to 2^24 entries (128 MiB) with one
    /// entry written, the mapping holding the buffer has little resident memory (`Rss` in smaps).
    #[test]
    fn grow_dense_is_amortised_and_leaves_the_new_room_unbacked() {
        let mut v = vec![1.5f64, -2.0];
        grow_dense(&mut v, 3);
        assert_eq!(v, [1.5, -2.0, 0.0]);
        assert!(v.capacity() >= 4, "doubled: {}", v.capacity());
        let (ptr, cap) = (v.as_ptr(), v.capacity());
        grow_dense(&mut v, cap);
        assert_eq!(
            (v.as_ptr(), v.len()),
            (ptr, cap),
            "within capacity: no reallocation"
        );
        grow_dense(&mut v, 2);
        assert_eq!(v.len(), cap, "a shorter length leaves it as it is");
        let big = 1usize << 24;
        grow_dense(&mut v, big);
        assert_eq!(
            (v.len(), v[0], v[1], v[2], v[big - 1]),
            (big, 1.5, -2.0, 0.0, 0.0)
        );
        v[big - 1] = 7.0;
        zeroed_dense(&mut v, big);
        assert!(v.iter().all(|x| x.to_bits() == 0));
        #[cfg(target_os = "linux")]
        {
            let at = v.as_ptr() as usize;
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            let mut inside = false;
            let mut rss_kb = None;
            for line in smaps.lines() {
                if let Some((range, _)) = line.split_once(' ') {
                    if let Some((a, b)) = range.split_once('-') {
                        if let (Ok(a), Ok(b)) =
                            (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                        {
                            inside = (a..b).contains(&at);
                            continue;
                        }
                    }
                }
                if inside {
                    if let Some(kb) = line.strip_prefix("Rss:") {
                        rss_kb = kb.trim().trim_end_matches(" kB").parse::<usize>().ok();
                    }
                }
            }
            let rss_kb = rss_kb.expect("the buffer's mapping is in smaps");
            assert!(rss_kb < 16 * 1024, "{rss_kb} kB resident of 128 MiB");
        }
    }

    /// `reserve_dense` makes the room, keeps the contents, and (Linux) marks a large buffer's mapping
    /// for huge pages: the `hg` flag in `/proc/self/smaps` of the region holding its middle.
    #[test]
    fn reserve_dense_keeps_contents_and_advises_huge_pages() {
        // The hint the binary installs (`cli::run`).
        set_dense_advice(crate::sys::advise_huge_pages);
        let mut v = vec![1.5f64, -2.0];
        reserve_dense(&mut v, 1 << 20);
        assert!(v.capacity() >= 1 << 20);
        assert_eq!(v, [1.5, -2.0]);
        let before = v.as_ptr();
        reserve_dense(&mut v, 1000);
        assert_eq!(v.as_ptr(), before, "enough room already: no reallocation");
        #[cfg(target_os = "linux")]
        {
            let middle = v.as_ptr() as usize + (v.capacity() * 8) / 2;
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            let mut inside = false;
            let mut flags = None;
            for line in smaps.lines() {
                if let Some((range, _)) = line.split_once(' ') {
                    if let Some((a, b)) = range.split_once('-') {
                        if let (Ok(a), Ok(b)) =
                            (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                        {
                            inside = a <= middle && middle < b;
                            continue;
                        }
                    }
                }
                if inside && line.starts_with("VmFlags:") {
                    flags = Some(line.to_string());
                }
            }
            let flags = flags.expect("the buffer's mapping is in smaps");
            assert!(flags.split_whitespace().any(|f| f == "hg"), "{flags}");
        }
    }

    /// The branch-free masked dot equals the dense `sparse_dot` bit for bit when `w` is zero off the
    /// mask, on rows mixing hits and misses, with signed zeros in `w`, and an empty `w`.
    #[test]
    fn masked_dot_equals_sparse_dot_bit_for_bit() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let d = 300;
        for trial in 0..200 {
            let mut w = vec![0.0; d];
            let mut mask = vec![0u64; d.div_ceil(64)];
            for _ in 0..rng.gen_range(0..20) {
                let j = rng.gen_range(0..d);
                w[j] = match trial % 3 {
                    0 => -0.0,
                    _ => rng.gen_range(-2.0..2.0),
                };
                mask[j / 64] |= 1 << (j % 64);
            }
            let mut indices: Vec<u32> = (0..d as u32).filter(|_| rng.gen_bool(0.2)).collect();
            indices.dedup();
            let values: Vec<f64> = indices.iter().map(|_| rng.gen_range(-3.0..3.0)).collect();
            let (masked, dense) = (
                masked_dot(&indices, &values, &w, &mask),
                sparse_dot(&indices, &values, &w),
            );
            assert_eq!(masked.to_bits(), dense.to_bits(), "trial {trial}");
            assert_eq!(masked_dot(&indices, &values, &[], &mask).to_bits(), 0);
        }
    }

    fn ht(dense: &[f64], k: usize) -> (Vec<f64>, Vec<u32>) {
        let (mut out, mut sup, mut s) = (Vec::new(), Vec::new(), ThresholdScratch::default());
        hard_threshold(dense, k, &mut out, &mut sup, &mut s);
        (out, sup)
    }

    /// The top k of (top k outside C) ∪ C is the dense top k, ties and zeros included.
    #[test]
    fn top_k_of_pairs_matches_the_dense_selection_split_anywhere() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let mut scratch = ThresholdScratch::default();
        for round in 0..200 {
            let d = rng.gen_range(1..300);
            // Few distinct magnitudes, so ties are common; some zeros.
            let dense: Vec<f64> = (0..d)
                .map(|_| rng.gen_range(-4i32..=4) as f64 * 0.5)
                .collect();
            let k = rng.gen_range(0..=d + 2);
            let want = top_k_indices(&dense, k, &mut scratch).to_vec();
            let changed: Vec<bool> = (0..d).map(|_| rng.gen_bool(0.3)).collect();
            let outside: Vec<f64> = dense
                .iter()
                .zip(&changed)
                .map(|(&v, &c)| if c { 0.0 } else { v })
                .collect();
            let top_outside = top_k_indices(&outside, k, &mut scratch).to_vec();
            let mut pairs: Vec<(u32, f64)> = (0..d)
                .filter(|&j| changed[j])
                .map(|j| (j as u32, dense[j]))
                .chain(top_outside.iter().map(|&j| (j, dense[j as usize])))
                .collect();
            // Any order.
            pairs.reverse();
            let got = top_k_of_pairs(pairs.into_iter(), k, &mut scratch).to_vec();
            let got_indices: Vec<u32> = got.iter().map(|&(j, _)| j).collect();
            assert_eq!(got_indices, want, "round {round}");
            for (j, v) in got {
                assert_eq!(v.to_bits(), dense[j as usize].to_bits());
            }
        }
    }

    /// Both lanes of an interleaved vector get exactly the top k of each lane alone, on the heap path
    /// (small k) and the quickselect path (large k), with ties, zeros and NaN, and lengths that leave
    /// partial chunks.
    #[test]
    fn top_k_of_two_lanes_equals_each_lane_alone() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(12);
        let mut alone = ThresholdScratch::default();
        let mut lanes = [ThresholdScratch::default(), ThresholdScratch::default()];
        for round in 0..60 {
            let d = rng.gen_range(1..2500);
            let k = if round % 2 == 0 {
                rng.gen_range(0..=d / 16 + 1)
            } else {
                rng.gen_range(0..=d + 1)
            };
            let interleaved: Vec<f64> = (0..2 * d)
                .map(|_| match rng.gen_range(0..10) {
                    0..=2 => 0.0,
                    3 => f64::NAN,
                    4..=6 => rng.gen_range(-4i32..=4) as f64,
                    _ => rng.gen_range(-1.0..1.0),
                })
                .collect();
            let (first, second) = top_k_indices_of_two_lanes(&interleaved, k, &mut lanes);
            let (first, second) = (first.to_vec(), second.to_vec());
            for (lane, got) in [first, second].into_iter().enumerate() {
                let dense: Vec<f64> = interleaved.chunks(2).map(|p| p[lane]).collect();
                let want = top_k_indices(&dense, k, &mut alone);
                assert_eq!(got, want, "round {round} lane {lane} d={d} k={k}");
            }
        }
    }

    /// The candidates handed on leave the top k of (known ∪ C) unchanged, ties at either bound
    /// included, with and without k known entries; every candidate is at least the known floor.
    #[test]
    fn top_k_candidates_keep_every_entry_the_top_k_can_take() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
        let mut scratch = ThresholdScratch::default();
        for round in 0..300 {
            let size = rng.gen_range(0..1500);
            let k = rng.gen_range(0..40);
            // Few distinct magnitudes so ties with the bounds are common; t as the warm start uses.
            let t = [0.0, 1.0, 0.5, 0.25][round % 4];
            let mut coordinates: Vec<u32> = (0..8000).filter(|_| rng.gen_bool(0.25)).collect();
            coordinates.truncate(size);
            let grid = |rng: &mut rand_chacha::ChaCha8Rng| match rng.gen_range(0..12) {
                0 => 0.0,
                1 => f64::NAN,
                _ => rng.gen_range(-8i32..=8) as f64 * 0.25,
            };
            let base: Vec<f64> = coordinates.iter().map(|_| grid(&mut rng)).collect();
            let step: Vec<f64> = coordinates.iter().map(|_| grid(&mut rng)).collect();
            // k known entries outside C (above its indices) half the time, else none.
            let known: Vec<(u32, f64)> = if round % 2 == 0 {
                (0..k)
                    .map(|m| (8001 + m as u32, rng.gen_range(1i32..=10) as f64 * 0.25))
                    .collect()
            } else {
                Vec::new()
            };
            let floor = if known.len() == k && k > 0 {
                known
                    .iter()
                    .map(|&(_, v)| v.abs())
                    .fold(f64::INFINITY, f64::min)
            } else {
                0.0
            };
            let all: Vec<(u32, f64)> = coordinates
                .iter()
                .zip(base.iter().zip(&step))
                .map(|(&j, (&b, &s))| (j, b + t * s))
                .collect();
            let mut kept = Vec::new();
            extend_with_top_k_candidates(
                &coordinates,
                &base,
                &step,
                t,
                k,
                floor,
                &mut kept,
                &mut scratch,
            );
            assert!(kept.iter().all(|&(_, v)| v.abs() >= floor), "round {round}");
            assert!(kept.len() <= all.len());
            let want = top_k_of_pairs(known.iter().copied().chain(all), k, &mut scratch).to_vec();
            let got = top_k_of_pairs(known.iter().copied().chain(kept), k, &mut scratch);
            assert_eq!(got, want, "round {round}");
        }
    }

    /// The paired threshold's floor from the previous support (a vector changing a little per call,
    /// as the learner's `z` does, with many ties at the floor) leaves exactly the unbounded selection.
    #[test]
    fn paired_threshold_with_the_previous_support_as_floor_keeps_the_same_set() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(14);
        let mut reference = ThresholdScratch::default();
        let mut scratch = ThresholdScratch::default();
        for round in 0..30 {
            let d = rng.gen_range(200..4000);
            let k = rng.gen_range(1..=d / 16);
            let grid = |rng: &mut rand_chacha::ChaCha8Rng| match rng.gen_range(0..20) {
                0 => 0.0,
                1 => f64::NAN,
                _ => rng.gen_range(-6i32..=6) as f64 * 0.5,
            };
            let mut v: Vec<f64> = (0..d).map(|_| grid(&mut rng)).collect();
            let (mut out, mut support) = (Vec::new(), Vec::new());
            for call in 0..20 {
                for _ in 0..d / 10 {
                    let j = rng.gen_range(0..d);
                    v[j] = grid(&mut rng);
                }
                hard_threshold_paired(&v, k, &mut out, &mut support, &mut scratch);
                let want = top_k_indices(&v, k, &mut reference);
                assert_eq!(support, want, "round {round} call {call}");
                for (j, x) in out.iter().enumerate() {
                    let expect = if support.contains(&(j as u32)) {
                        v[j]
                    } else {
                        0.0
                    };
                    assert_eq!(
                        x.to_bits(),
                        expect.to_bits(),
                        "round {round} call {call} [{j}]"
                    );
                }
            }
        }
    }

    #[test]
    fn keeps_largest_magnitudes() {
        let (out, sup) = ht(&[0.5, -3.0, 2.0, 0.1, -2.5], 2);
        assert_eq!(sup, vec![1, 4]);
        assert_eq!(out, vec![0.0, -3.0, 0.0, 0.0, -2.5]);
    }

    #[test]
    fn ties_lower_index_wins() {
        let (_, sup) = ht(&[1.0, -1.0, 1.0, 1.0], 2);
        assert_eq!(sup, vec![0, 1]);
        let (_, sup) = ht(&[0.0, 2.0, -2.0, 2.0], 1);
        assert_eq!(sup, vec![1]);
    }

    #[test]
    fn never_selects_zeros_and_handles_k_edge_cases() {
        let (_, sup) = ht(&[0.0, 1.0, 0.0], 3);
        assert_eq!(sup, vec![1]);
        let (out, sup) = ht(&[1.0, 2.0], 0);
        assert!(sup.is_empty() && out.iter().all(|v| *v == 0.0));
        let (_, sup) = ht(&[f64::NAN, 1.0], 2);
        assert_eq!(sup, vec![1]);
    }

    #[test]
    fn matches_sort_reference_on_random_vectors() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..200 {
            let d = rng.gen_range(1..60);
            let k = rng.gen_range(0..=d);
            // Few distinct values so ties are common.
            let v: Vec<f64> = (0..d).map(|_| rng.gen_range(-3i32..=3) as f64).collect();
            let (out, sup) = ht(&v, k);
            let mut idx: Vec<usize> = (0..d).filter(|&j| v[j] != 0.0).collect();
            idx.sort_by(|&a, &b| v[b].abs().partial_cmp(&v[a].abs()).unwrap().then(a.cmp(&b)));
            idx.truncate(k);
            idx.sort();
            assert_eq!(sup, idx.iter().map(|&j| j as u32).collect::<Vec<_>>());
            assert!(sup.len() <= k);
            for j in 0..d {
                let expect = if idx.contains(&j) { v[j] } else { 0.0 };
                assert_eq!(out[j], expect);
            }
        }
    }

    #[test]
    fn dot_axpy_and_support_changes() {
        let w = [1.0, 2.0, 3.0];
        assert_eq!(sparse_dot(&[0, 2, 9], &[1.0, 0.5, 100.0], &w), 2.5);
        let mut y = vec![0.0; 3];
        sparse_axpy(2.0, &[1, 2], &[1.0, -1.0], &mut y);
        assert_eq!(y, vec![0.0, 2.0, -2.0]);
        assert_eq!(support_changes(&[1, 2, 3], &[2, 3, 4]), 2);
        assert_eq!(support_changes(&[], &[5]), 1);
    }

    /// The heap path (small k), the quickselect path (large k) and the paired variant (reusing the
    /// previous call's `out`/`support`, same and other `d`) all equal a sort-based reference, with ties.
    #[test]
    fn heap_quickselect_and_paired_agree_with_a_sort_reference() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let (mut out, mut sup) = (Vec::new(), Vec::new());
        let mut scratch = ThresholdScratch::default();
        for round in 0..40 {
            let d = rng.gen_range(1..3000);
            let k = if round % 2 == 0 {
                rng.gen_range(0..=d / 16 + 1)
            } else {
                rng.gen_range(0..=d)
            };
            for _ in 0..2 {
                let v: Vec<f64> = (0..d)
                    .map(|_| match rng.gen_range(0..10) {
                        0..=3 => 0.0,
                        4 => f64::NAN,
                        5..=7 => rng.gen_range(-4i32..=4) as f64,
                        _ => rng.gen_range(-1.0..1.0),
                    })
                    .collect();
                let mut idx: Vec<usize> =
                    (0..d).filter(|&j| v[j] != 0.0 && !v[j].is_nan()).collect();
                idx.sort_by(|&a, &b| v[b].abs().partial_cmp(&v[a].abs()).unwrap().then(a.cmp(&b)));
                idx.truncate(k);
                idx.sort();
                let want: Vec<u32> = idx.iter().map(|&j| j as u32).collect();
                let (dense_out, dense_sup) = ht(&v, k);
                assert_eq!(dense_sup, want, "d={d} k={k}");
                hard_threshold_paired(&v, k, &mut out, &mut sup, &mut scratch);
                assert_eq!(sup, want, "paired d={d} k={k}");
                assert_eq!(out.len(), d);
                for j in 0..d {
                    assert_eq!(out[j].to_bits(), dense_out[j].to_bits(), "paired out[{j}]");
                }
            }
        }
    }
}
