//! Hashed feature names (`ingest.feature_names = "hashed"`): a name's index is its seeded hash
//! ([`Hashing`]: XXH3-64 of the name's UTF-8 bytes with `ingest.hash_seed`, masked to its low
//! `ingest.hash_bits` bits), so any number of distinct names is accepted, nothing grows and nothing is
//! checkpointed but the bits and the seed; and [`HashedNames`], the bounded memory of the name last
//! seen at an index, from which the published models report the names of their support features.
//!
//! **Collisions.** Two names with the same hash share one feature (in one sample their values add, as
//! in Vowpal Wabbit). The memory notices a collision when an index it remembers arrives with another
//! name; it then keeps the newer name and counts the collision
//! (`thresher_hashed_name_collisions_total`). A support feature seen with two names is listed as
//! collided in the model (`feature_names_collided`).
//!
//! **Memory bound.** The memory is a direct-mapped table of `ingest.hash_names_kept` slots (index mod
//! slots), each holding one index, its last name and a count, plus the names of the published
//! supports' indices (pinned, at most the sum of the learners' `k`). Which index keeps a slot: the
//! frequent one. A sighting of the slot's index raises its count, a sighting of another index lowers
//! it, and at zero the other index takes the slot (counted in `thresher_hashed_names_evicted_total`),
//! as in the "frequent items" counters of Misra and Gries: an index seen more often than all the others
//! of its slot together keeps its name, and support features are frequent ones. Pinned names are never
//! evicted, so a support feature keeps its name once seen. At most `slots x (32 B +
//! ingest.max_feature_name_bytes)` plus the pinned names: a bound independent of the number of
//! distinct names in the stream.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::config::FeatureNames;

/// The hash of names to indices: the low `bits` bits of XXH3-64 of the name's bytes with `seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hashing {
    /// `ingest.hash_bits`: indices are below `2^bits`.
    pub bits: u32,
    /// `ingest.hash_seed`.
    pub seed: u64,
}

impl Hashing {
    /// The feature index of `name`.
    pub fn index(&self, name: &str) -> u32 {
        (xxh3_64_with_seed(name.as_bytes(), self.seed) & ((1u64 << self.bits) - 1)) as u32
    }

    /// How messages name this hashing.
    pub fn describe(&self) -> String {
        format!(
            "hashed names (ingest.hash_bits = {}, ingest.hash_seed = {})",
            self.bits, self.seed
        )
    }
}

/// The hashing in force and the bounded memory of names last seen (see the module documentation).
#[derive(Debug)]
pub struct HashedNames {
    hashing: Hashing,
    /// Why a lock: HTTP handlers on several runtime threads record the names of their bodies; each
    /// takes it once per body, for a few string comparisons.
    memory: Mutex<Memory>,
    collisions: AtomicU64,
    evictions: AtomicU64,
}

#[derive(Debug)]
struct Memory {
    /// Direct-mapped: slot `index % len` holds an index, its last name and its count.
    recent: Vec<Option<Slot>>,
    /// The names of the indices in some published support (`None`: not seen since it joined).
    pinned: HashMap<u32, Pinned>,
    /// Each learner's last published support (one entry per learner).
    supports: HashMap<String, Vec<u32>>,
}

#[derive(Debug, Clone)]
struct Slot {
    index: u32,
    name: Box<str>,
    /// Sightings of `index` less sightings of other indices of the slot since it took the slot.
    count: u32,
}

#[derive(Debug, Clone, Default)]
struct Pinned {
    name: Option<Box<str>>,
    /// Seen with two different names since it was pinned.
    collided: bool,
}

impl HashedNames {
    /// Hashing by `hashing`, remembering names in `slots` slots (at least 1).
    pub fn new(hashing: Hashing, slots: usize) -> HashedNames {
        HashedNames {
            hashing,
            memory: Mutex::new(Memory {
                recent: vec![None; slots.max(1)],
                pinned: HashMap::new(),
                supports: HashMap::new(),
            }),
            collisions: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// The hashed names `ingest.feature_names` asks for (`None`: the dictionary).
    pub fn configured(mode: FeatureNames) -> Option<HashedNames> {
        match mode {
            FeatureNames::Dictionary => None,
            FeatureNames::Hashed { bits, seed, kept } => {
                Some(HashedNames::new(Hashing { bits, seed }, kept))
            }
        }
    }

    pub fn hashing(&self) -> Hashing {
        self.hashing
    }

    /// The index of `name`.
    pub fn index(&self, name: &str) -> u32 {
        self.hashing.index(name)
    }

    /// Collisions noticed so far (an index remembered with one name seen with another).
    pub fn collisions(&self) -> u64 {
        self.collisions.load(Ordering::Relaxed)
    }

    /// Remembered names replaced by a name of another index in their slot.
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// Remembers the names of an accepted training body, `(index, name)` each.
    pub fn record<'a>(&self, names: impl IntoIterator<Item = (u32, &'a str)>) {
        let (mut collisions, mut evictions) = (0, 0);
        let mut m = self.memory.lock();
        let Memory { recent, pinned, .. } = &mut *m;
        let slots = recent.len();
        for (index, name) in names {
            let mut collided = false;
            if let Some(p) = pinned.get_mut(&index) {
                match &p.name {
                    Some(held) if **held == *name => {}
                    Some(_) => {
                        collided = true;
                        p.collided = true;
                        p.name = Some(name.into());
                    }
                    None => p.name = Some(name.into()),
                }
            }
            let slot = &mut recent[index as usize % slots];
            match slot {
                Some(s) if s.index == index => {
                    s.count = s.count.saturating_add(1);
                    if *s.name != *name {
                        collided = true;
                        s.name = name.into();
                    }
                }
                Some(s) if s.count > 1 => s.count -= 1,
                _ => {
                    evictions += u64::from(slot.is_some());
                    *slot = Some(Slot {
                        index,
                        name: name.into(),
                        count: 1,
                    });
                }
            }
            collisions += u64::from(collided);
        }
        drop(m);
        self.collisions.fetch_add(collisions, Ordering::Relaxed);
        self.evictions.fetch_add(evictions, Ordering::Relaxed);
    }

    /// Pins the names of `learner`'s newly published `support`: they stay remembered while some
    /// learner's support holds them. A support index not remembered gets its name when next seen.
    pub fn pin(&self, learner: &str, support: &[u32]) {
        let mut m = self.memory.lock();
        if m.supports.get(learner).map(Vec::as_slice) == Some(support) {
            return;
        }
        m.supports.insert(learner.to_string(), support.to_vec());
        let mut pinned = HashMap::new();
        for &j in m.supports.values().flatten() {
            if pinned.contains_key(&j) {
                continue;
            }
            let entry = m.pinned.get(&j).cloned().unwrap_or_else(|| Pinned {
                name: m.recent_name(j).map(Into::into),
                collided: false,
            });
            pinned.insert(j, entry);
        }
        m.pinned = pinned;
    }

    /// The name last seen for each index (`None` where none is remembered).
    pub fn names_of(&self, indices: &[u32]) -> Vec<Option<String>> {
        let m = self.memory.lock();
        indices
            .iter()
            .map(|j| {
                m.pinned
                    .get(j)
                    .and_then(|p| p.name.as_deref())
                    .or_else(|| m.recent_name(*j))
                    .map(str::to_string)
            })
            .collect()
    }

    /// The indices of `indices` seen with two names since they were pinned.
    pub fn collided_of(&self, indices: &[u32]) -> Vec<u32> {
        let m = self.memory.lock();
        indices
            .iter()
            .copied()
            .filter(|j| m.pinned.get(j).is_some_and(|p| p.collided))
            .collect()
    }

    /// Heap bytes held: the slots, the remembered names and the pinned entries.
    pub fn heap_bytes(&self) -> usize {
        let m = self.memory.lock();
        let slot = std::mem::size_of::<Option<Slot>>();
        m.recent.capacity() * slot
            + m.recent
                .iter()
                .flatten()
                .map(|s| s.name.len())
                .sum::<usize>()
            + m.pinned.capacity() * (slot + 8)
            + m.pinned
                .values()
                .filter_map(|p| p.name.as_ref())
                .map(|n| n.len())
                .sum::<usize>()
    }
}

impl Memory {
    fn recent_name(&self, j: u32) -> Option<&str> {
        match &self.recent[j as usize % self.recent.len()] {
            Some(s) if s.index == j => Some(&s.name),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Indices recorded for fixed names and seeds: a change of hash function or masking changes
    /// every hashed model and checkpoint, so it must show here.
    #[test]
    fn a_fixed_name_and_seed_give_a_fixed_index() {
        let h = |bits, seed| Hashing { bits, seed };
        let got: Vec<u32> = [
            h(20, 0).index("w1"),
            h(20, 0).index("word"),
            h(20, 1).index("word"),
            h(24, 0).index("word"),
            h(12, 42).index("naïve"),
        ]
        .to_vec();
        assert_eq!(
            got,
            vec![
                RECORDED[0],
                RECORDED[1],
                RECORDED[2],
                RECORDED[3],
                RECORDED[4]
            ]
        );
        // The low bits of the wider hash are the narrower one's.
        assert_eq!(
            h(24, 0).index("word") & ((1 << 20) - 1),
            h(20, 0).index("word")
        );
        for bits in 1..=30 {
            assert!(h(bits, 7).index("x") < 1 << bits);
        }
    }

    /// The same as the C reference library's `XXH3_64bits_withSeed` (libxxhash 0.8) masked to the bits.
    const RECORDED: [u32; 5] = [484_778, 810_069, 674_271, 7_101_525, 1_685];

    #[test]
    fn names_are_remembered_evicted_pinned_and_collisions_counted() {
        let names = HashedNames::new(Hashing { bits: 20, seed: 0 }, 4);
        names.record([(1, "a"), (2, "b")]);
        assert_eq!(
            names.names_of(&[1, 2, 3]),
            vec![Some("a".into()), Some("b".into()), None]
        );
        // Index 5 takes index 1's slot (5 mod 4): index 1 is forgotten, one eviction.
        names.record([(5, "e")]);
        assert_eq!(names.evictions(), 1);
        assert_eq!(names.names_of(&[1, 5]), vec![None, Some("e".into())]);
        // Pinned: index 2 keeps its name though index 6 takes its slot.
        names.pin("primary", &[2, 7]);
        names.record([(6, "f")]);
        assert_eq!(names.evictions(), 2);
        assert_eq!(
            names.names_of(&[2, 6, 7]),
            vec![Some("b".into()), Some("f".into()), None]
        );
        // A support index not seen yet gets its name when seen.
        names.record([(7, "g")]);
        assert_eq!(names.names_of(&[7]), vec![Some("g".into())]);
        // Another name at a remembered index: a collision, the newer name reported.
        assert_eq!(names.collisions(), 0);
        names.record([(2, "b2")]);
        assert_eq!(names.collisions(), 1);
        assert_eq!(names.names_of(&[2]), vec![Some("b2".into())]);
        assert_eq!(names.collided_of(&[2, 7]), vec![2]);
        // Unpinned once no support holds it: the slot goes to the more frequent index.
        names.pin("primary", &[7]);
        names.record([(10, "j")]);
        assert_eq!(names.names_of(&[2, 10]), vec![None, Some("j".into())]);
        // A frequent index keeps its slot against rarer ones: seen 3 times, it outlasts 2 others.
        names.record([(3, "c"), (3, "c"), (3, "c"), (11, "k"), (15, "o")]);
        assert_eq!(
            names.names_of(&[3, 11, 15]),
            vec![Some("c".into()), None, None]
        );
        let before = names.evictions();
        names.record([(11, "k")]);
        assert_eq!(names.names_of(&[3, 11]), vec![None, Some("k".into())]);
        assert_eq!(names.evictions(), before + 1);
        // A memory of one slot still bounds everything.
        let one = HashedNames::new(Hashing { bits: 4, seed: 0 }, 0);
        one.record((0..1000).map(|i| (i % 16, "x")));
        assert!(one.heap_bytes() < 100, "{}", one.heap_bytes());
    }
}
