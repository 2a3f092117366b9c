//! Exact outputs of the subset solver, recorded so refactors of Alg. 1 / Alg. 2 can prove they change
//! nothing: every case runs seeded problems through [`SubsetSolver`] (the public entry, so the record
//! survives internal reshuffles) and folds the bits of every outer step (primal, dual, gap, inner
//! iteration count, active-set size) and of the final weights into one FNV-1a fingerprint. The final
//! objective and the total inner-iteration count are also checked in plain numbers, so a failure shows
//! what moved. Squared and logistic losses, both inner variants, both super-gradient choices, the default
//! and a fixed `omega`, and a warm-started path.

use super::*;
use Variant::{DualAst, PrimDual};

/// FNV-1a over 64-bit words.
struct Fingerprint(u64);

impl Fingerprint {
    fn new() -> Fingerprint {
        Fingerprint(0xcbf29ce484222325)
    }

    fn word(&mut self, w: u64) {
        for byte in w.to_le_bytes() {
            self.0 ^= byte as u64;
            self.0 = self.0.wrapping_mul(0x00000100000001b3);
        }
    }

    fn float(&mut self, v: f64) {
        self.word(v.to_bits());
    }
}

/// What one case produced: the fingerprint, `P` of the final model (bits), the total inner iterations.
#[derive(Debug, PartialEq)]
struct Record {
    fingerprint: u64,
    objective_bits: u64,
    inner_iterations: usize,
}

fn record_solve(solver: &mut SubsetSolver, print: &mut Fingerprint, inner: &mut usize) {
    solver.solve(&mut |s| {
        print.float(s.row.primal);
        print.float(s.row.dual);
        print.float(s.row.gap);
        print.word(s.inner_iterations as u64);
        print.word(s.active_set_size as u64);
        print.word(s.newly_screened as u64);
        print.word(s.added as u64);
        *inner += s.inner_iterations;
    });
    let model = solver.model();
    for &w in model.weights {
        print.float(w);
    }
    for &j in model.support {
        print.word(j as u64);
    }
}

fn run_case(
    loss: SubsetLoss,
    variant: Variant,
    exact: bool,
    omega: Option<f64>,
    seed: u64,
) -> Record {
    let mut prob = dense_problem(40, 30, 4, 0.5, 0.3, seed);
    if loss == SubsetLoss::Logistic {
        prob.y
            .iter_mut()
            .for_each(|v| *v = if *v > 0.0 { 1.0 } else { -1.0 });
    }
    let data = prob.dataset();
    let mut par = SubsetParams::new(Penalty::new(0.2, 0.1, 0.5).unwrap());
    par.loss = loss;
    par.variant = variant;
    par.exact_supergradient = exact;
    par.omega = omega;
    par.max_outer = 60;
    par.max_inner = 400;
    let mut solver = SubsetSolver::new(&data, par).unwrap();
    let mut print = Fingerprint::new();
    let mut inner = 0;
    record_solve(&mut solver, &mut print, &mut inner);
    // A warm-started second penalty (set_penalty keeps the solution and the dual point).
    solver
        .set_penalty(Penalty::new(0.05, 0.05, 0.3).unwrap())
        .unwrap();
    record_solve(&mut solver, &mut print, &mut inner);
    let objective = solver.objective_of(solver.model().weights);
    Record {
        fingerprint: print.0,
        objective_bits: objective.to_bits(),
        inner_iterations: inner,
    }
}

/// One case: variant, exact super-gradient, omega, seed, and the record it must reproduce.
type Case = (Variant, bool, Option<f64>, u64, Record);

fn check(loss: SubsetLoss, cases: &[Case]) {
    let mut failures = Vec::new();
    for (variant, exact, omega, seed, expected) in cases {
        let got = run_case(loss, *variant, *exact, *omega, *seed);
        if &got != expected {
            failures.push(format!(
                "{loss:?} {variant:?} exact={exact} omega={omega:?} seed={seed}: got {got:#x?} \
                 (objective {}), expected {expected:#x?} (objective {})",
                f64::from_bits(got.objective_bits),
                f64::from_bits(expected.objective_bits)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `Record` from the fingerprint, the objective's bits and the inner-iteration total.
const fn rec(fingerprint: u64, objective_bits: u64, inner_iterations: usize) -> Record {
    Record {
        fingerprint,
        objective_bits,
        inner_iterations,
    }
}

#[rustfmt::skip]
const SQUARED: [Case; 5] = [
    (PrimDual, true, None, 3100, rec(0x91ef66eee9db951f, 0x405d2ed4a7f12a41, 154)),
    (PrimDual, false, None, 3101, rec(0x850e4714ca0ef084, 0x40661ac5d2e17cc6, 94)),
    (DualAst, true, None, 3102, rec(0x4d9136b9e8ba0bc5, 0x405aa7d3330da743, 167)),
    (DualAst, false, Some(0.05), 3103, rec(0xeaf6fe722b0846fc, 0x40658be78aa40ea6, 309)),
    (PrimDual, true, Some(0.0005), 3104, rec(0xe159609b5de40159, 0x405f31755937707a, 1219)),
];

#[rustfmt::skip]
const LOGISTIC: [Case; 5] = [
    (PrimDual, true, None, 3200, rec(0x9f475a698fa7a263, 0x4034acadbd46d7ae, 118)),
    (PrimDual, false, None, 3201, rec(0x2468d509a07c96d6, 0x403690fbf19db105, 68)),
    (DualAst, true, None, 3202, rec(0x241ff091d32afb26, 0x40380608d2fb61ae, 117)),
    (DualAst, false, Some(0.05), 3203, rec(0xff6feec2ad864a92, 0x4036dbfc91ad2fc1, 125)),
    (PrimDual, true, Some(0.0005), 3204, rec(0xba0551749c55c718, 0x40377c4dc77db116, 611)),
];

#[test]
fn squared_loss_outputs_are_bit_for_bit_the_recorded_ones() {
    check(SubsetLoss::Squared, &SQUARED);
}

#[test]
fn logistic_loss_outputs_are_bit_for_bit_the_recorded_ones() {
    check(SubsetLoss::Logistic, &LOGISTIC);
}
