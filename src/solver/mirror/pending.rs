//! The mirror learner's pending mini-batch gradient: a sparse accumulator keyed by coordinate.
//!
//! Why not a dense d-vector: a mini-batch of 128 rows of 40 features touches ~5 000 coordinates at
//! random places of a 2^20-long vector (8 MB, plus a 1 MB "touched" flag vector), and every one of
//! those read-modify-writes, and the reset after the step, is a miss in the core's cache, waited for
//! in turn. Here the coordinates live in first-touch order in two short vectors (`coords`, `sums`)
//! and an open-addressing table maps a coordinate to its place; at most half full, the table for such
//! a batch is 16 384 slots of 8 bytes (128 KB), which stays in the core's second-level cache. The
//! sums are the same additions in the same order as the dense vector's, so the learner's iterates are
//! the same bit for bit. The learner also no longer holds two d-vectors it only used as scratch.

/// A slot: the coordinate and its place in `coords` plus one (0 = a free slot).
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    coord: u32,
    place: u32,
}

/// Slots of a fresh accumulator (a power of two).
const INITIAL_SLOTS: usize = 64;

/// Sums `value`s per coordinate, remembering the order in which coordinates first arrived.
#[derive(Debug, Clone)]
pub(crate) struct PendingGradient {
    /// Linear probing from Fibonacci hashing of the coordinate; `slots.len()` is a power of two, at
    /// least twice `coords.len()`.
    slots: Vec<Slot>,
    /// `log2(slots.len())`.
    bits: u32,
    /// The coordinates in first-touch order.
    pub(crate) coords: Vec<u32>,
    /// `sums[p]` belongs to `coords[p]`; the learner overwrites it in place during a step.
    pub(crate) sums: Vec<f64>,
    /// `slot_of[p]`: the slot holding `coords[p]`, so that a reset frees exactly the used slots.
    slot_of: Vec<u32>,
}

impl Default for PendingGradient {
    fn default() -> Self {
        PendingGradient {
            slots: vec![Slot::default(); INITIAL_SLOTS],
            bits: INITIAL_SLOTS.trailing_zeros(),
            coords: Vec::new(),
            sums: Vec::new(),
            slot_of: Vec::new(),
        }
    }
}

impl PendingGradient {
    /// The home slot of `coord`: the top `bits` bits of `coord * 2^32 / phi` (Knuth's multiplicative
    /// hashing), which spreads runs of neighbouring feature indices across the table.
    #[inline(always)]
    fn home(&self, coord: u32) -> usize {
        (coord.wrapping_mul(0x9E37_79B9) >> (32 - self.bits)) as usize
    }

    /// The slot that holds `coord`, or the free slot where it would go.
    #[inline(always)]
    fn find(&self, coord: u32) -> usize {
        let mask = self.slots.len() - 1;
        let mut at = self.home(coord);
        loop {
            let slot = self.slots[at];
            if slot.place == 0 || slot.coord == coord {
                return at;
            }
            at = (at + 1) & mask;
        }
    }

    /// The place of `coord` in `coords`, adding it (with a sum of `0.0`) if it is new.
    #[inline(always)]
    fn place(&mut self, coord: u32) -> usize {
        let at = self.find(coord);
        let slot = self.slots[at];
        if slot.place != 0 {
            return slot.place as usize - 1;
        }
        if 2 * (self.coords.len() + 1) > self.slots.len() {
            self.grow();
            return self.place(coord);
        }
        let place = self.coords.len();
        self.slots[at] = Slot {
            coord,
            place: place as u32 + 1,
        };
        self.coords.push(coord);
        self.sums.push(0.0);
        self.slot_of.push(at as u32);
        place
    }

    /// `sum[coord] += value`.
    #[inline(always)]
    pub(crate) fn add(&mut self, coord: u32, value: f64) {
        let place = self.place(coord);
        self.sums[place] += value;
    }

    /// Makes `coord` a candidate (sum unchanged, `0.0` if new).
    pub(crate) fn touch(&mut self, coord: u32) {
        self.place(coord);
    }

    /// The sum held for `coord` (`0.0` if it was never touched).
    pub(crate) fn get(&self, coord: u32) -> f64 {
        let slot = self.slots[self.find(coord)];
        if slot.place == 0 {
            0.0
        } else {
            self.sums[slot.place as usize - 1]
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.coords.len()
    }

    /// Forgets every coordinate, keeping the room.
    pub(crate) fn clear(&mut self) {
        for &at in &self.slot_of {
            self.slots[at as usize] = Slot::default();
        }
        self.coords.clear();
        self.sums.clear();
        self.slot_of.clear();
    }

    /// Doubles the table and re-files every coordinate.
    fn grow(&mut self) {
        self.bits += 1;
        self.slots = vec![Slot::default(); 1 << self.bits];
        for (place, &coord) in self.coords.iter().enumerate() {
            let at = self.find(coord);
            self.slots[at] = Slot {
                coord,
                place: place as u32 + 1,
            };
            self.slot_of[place] = at as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PendingGradient;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Against a dense vector and a first-touch list, over growth and resets, with clustered and
    /// colliding coordinates: the same sums bit for bit, the same order.
    #[test]
    fn sums_and_order_are_a_dense_vectors() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut pending = PendingGradient::default();
        let d = 1 << 20;
        let mut dense = vec![0.0f64; d];
        let mut order: Vec<u32> = Vec::new();
        let mut seen = vec![false; d];
        for round in 0..40 {
            let touches = [3usize, 50, 700, 6000][round % 4];
            for _ in 0..touches {
                // Half the coordinates from a narrow band (collisions, repeats), half anywhere.
                let j = if rng.gen_bool(0.5) {
                    rng.gen_range(0..300u32) * 64
                } else {
                    rng.gen_range(0..d as u32)
                };
                let v: f64 = rng.gen_range(-1.0..1.0);
                if !seen[j as usize] {
                    seen[j as usize] = true;
                    order.push(j);
                }
                dense[j as usize] += v;
                if rng.gen_bool(0.1) {
                    pending.touch(j);
                }
                pending.add(j, v);
            }
            assert_eq!(pending.coords, order);
            assert_eq!(pending.len(), order.len());
            for (p, &j) in order.iter().enumerate() {
                assert_eq!(pending.sums[p].to_bits(), dense[j as usize].to_bits());
                assert_eq!(pending.get(j).to_bits(), dense[j as usize].to_bits());
            }
            assert_eq!(pending.get(d as u32 + 5), 0.0);
            for &j in &order {
                dense[j as usize] = 0.0;
                seen[j as usize] = false;
            }
            order.clear();
            pending.clear();
            assert_eq!(pending.len(), 0);
        }
        // Coordinates at the ends of the u32 range.
        pending.add(u32::MAX, 2.0);
        pending.add(0, 1.0);
        pending.add(u32::MAX, 0.5);
        assert_eq!(pending.coords, vec![u32::MAX, 0]);
        assert_eq!(pending.sums, vec![2.5, 1.0]);
    }
}
